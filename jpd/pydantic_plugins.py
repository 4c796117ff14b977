"""The daemon runs without third-party pydantic plugins.

A plugin would see every value the daemon validates, secrets included, so `jpd` turns
them off. pydantic looks for plugins through package metadata: its plugin loader
imports `importlib.metadata` (about 10 ms, some forty modules) the first time any
validator is built, even when plugins are disabled. With plugins off, a loader that
finds none is the same loader without that import.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterable
from typing import Any

_LOADER = "pydantic.plugin._loader"
"""The private pydantic module `create_schema_validator` takes `get_plugins` from
(tests/unit/test_pydantic_plugins.py checks that it still does)."""


def _no_plugins() -> Iterable[Any]:
    return ()


def run_without_plugins() -> None:
    """Turn pydantic plugins off for this process (before any validator is built).

    `PYDANTIC_DISABLE_PLUGINS` is pydantic's own switch; the loader stand-in saves its
    metadata import. A loader already imported is left alone: the switch still applies.
    """
    os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"
    if _LOADER not in sys.modules:
        loader = types.ModuleType(_LOADER, "No pydantic plugins (jpd.pydantic_plugins).")
        loader.get_plugins = _no_plugins  # type: ignore[attr-defined]
        sys.modules[_LOADER] = loader
