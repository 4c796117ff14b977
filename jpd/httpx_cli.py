"""The daemon never loads httpx's command line.

`import httpx` tries `from ._main import main` (its `httpx` command), which imports
click, rich and pygments whenever they are installed: rich is a dependency of `jp`, and
click comes with `llm` (the `local` extra) and uvicorn. That is some 40 ms, on the
daemon's first model call, for a command the daemon never runs. With `httpx._main`
marked missing, httpx defines the stand-in it uses when its `cli` extra is absent.
"""

from __future__ import annotations

import sys

_CLI = "httpx._main"
"""httpx's command-line module (tests/unit/test_httpx_cli.py checks httpx still
imports it that way)."""


def skip_httpx_cli() -> None:
    """Mark httpx's command line missing for this process, before httpx is imported
    (`None` in `sys.modules` makes its import fail). One already imported is kept."""
    if _CLI not in sys.modules:
        sys.modules[_CLI] = None  # type: ignore[assignment]  # the import system's "missing"
