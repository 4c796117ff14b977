"""The daemon never imports httpx's command line (`jpd.httpx_cli`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from jpd import httpx_cli

IMPORT_WITHOUT_CLI = r"""
import sys
from jpd.httpx_cli import skip_httpx_cli
skip_httpx_cli()
import httpx
client = httpx.AsyncClient()  # the API is whole
assert callable(httpx.main) and httpx.main.__module__ == "httpx"
print(sorted({name.split(".")[0] for name in sys.modules} & {"rich", "click", "pygments"}))
"""


def test_httpx_loads_without_rich_click_or_pygments() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", IMPORT_WITHOUT_CLI],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert proc.stdout.strip() == "[]"


def test_httpx_still_imports_its_command_line_as_the_stand_in_expects() -> None:
    # If httpx stops importing `._main` inside `try/except ImportError`, marking it
    # missing would break `import httpx`: this says so before a user does.
    source = (Path(httpx.__file__).parent / "__init__.py").read_text()
    assert "try:\n    from ._main import main\nexcept ImportError:" in source
    assert httpx_cli._CLI == "httpx._main"


def test_a_command_line_already_imported_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = object()
    monkeypatch.setitem(sys.modules, "httpx._main", loaded)
    httpx_cli.skip_httpx_cli()
    assert sys.modules["httpx._main"] is loaded
