"""Unit tests never touch the user's `jp` state (the current conversation per workspace)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_jp_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JP_STATE_DIR", str(tmp_path / "jp-state"))
