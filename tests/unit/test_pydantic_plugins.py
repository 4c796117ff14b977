"""The daemon runs without pydantic plugins, and without importing package metadata
to look for them (`jpd.pydantic_plugins`)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pydantic.plugin._schema_validator as schema_validator
import pytest

from jpd import pydantic_plugins

VALIDATE_WITHOUT_PLUGINS = r"""
import os, sys
from jpd.pydantic_plugins import run_without_plugins
run_without_plugins()
from pydantic import BaseModel, TypeAdapter

class Point(BaseModel):
    x: int

assert Point.model_validate({"x": "3"}).x == 3
assert TypeAdapter(list[int]).validate_python(["1"]) == [1]
assert os.environ["PYDANTIC_DISABLE_PLUGINS"] == "__all__"
print("importlib.metadata" in sys.modules)
"""


def test_validators_build_without_importing_package_metadata() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", VALIDATE_WITHOUT_PLUGINS],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert proc.stdout.strip() == "False"


def test_pydantic_still_takes_only_get_plugins_from_the_loader() -> None:
    # The stand-in provides only `get_plugins`: if pydantic starts importing more from
    # its loader, or from another module, the stand-in must follow.
    source = inspect.getsource(schema_validator.create_schema_validator)
    assert "from ._loader import get_plugins\n" in source
    import pydantic.plugin._loader as real  # this process runs with the real loader

    assert real.__name__ == pydantic_plugins._LOADER
    assert callable(real.get_plugins)


def test_a_loader_already_imported_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    import pydantic.plugin._loader as real

    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "")
    pydantic_plugins.run_without_plugins()
    assert sys.modules[pydantic_plugins._LOADER] is real
    assert list(real.get_plugins()) == []


def _frame(message: dict[str, object]) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def test_the_daemon_answers_initialize_without_importing_package_metadata(
    tmp_path: Path,
) -> None:
    # `python -m jpd` as `jp` starts it: the stand-in must be in place before the first
    # validator is built (initialize's result is built as `jpd.rpc.methods` loads).
    requests = b"".join(
        _frame(m)
        for m in (
            {
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": 1, "clientInfo": {"name": "t"}},
            },
            {"id": 2, "method": "shutdown"},
            {"method": "exit"},
        )
    )
    env = {**os.environ, "JP_DATA_DIR": str(tmp_path / "data"), "JP_CONFIG": "/nonexistent"}
    env["PYTHONPROFILEIMPORTTIME"] = "1"  # each import, on stderr
    proc = subprocess.run(
        [sys.executable, "-m", "jpd"],
        input=requests,
        env=env,
        capture_output=True,
        timeout=60,
    )
    # (The exit code is 1: its input ends, a connection lost, before `exit` is read.)
    assert b'"serverInfo"' in proc.stdout, proc.stderr[-2000:]
    assert b"Traceback" not in proc.stderr
    imported = {
        line.rsplit(b"|", 1)[-1].strip().decode()
        for line in proc.stderr.splitlines()
        if line.startswith(b"import time:")
    }
    assert "jpd.rpc.methods" in imported  # the report is there
    assert "importlib.metadata" not in imported
    assert "pydantic.plugin._loader" not in imported
