"""Unit tests never touch the user's `jp` state (the current conversation per workspace)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_jp_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JP_STATE_DIR", str(tmp_path / "jp-state"))


@pytest.fixture(autouse=True)
def _workspace_configs_trusted(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tests of the config layers write workspace files and expect them used: they are
    trusted here, except in modules that test trust itself (`CHECKS_TRUST = True`)."""
    if getattr(request.module, "CHECKS_TRUST", False):
        return
    import jpd.config.trust

    monkeypatch.setattr(jpd.config.trust, "is_trusted", lambda path, raw, env: True)
