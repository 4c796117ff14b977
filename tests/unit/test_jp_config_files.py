"""`jp config path` / `jp config init`: the paths agree with the daemon's, the starter
file is valid config, an existing file is kept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from jpcli.__main__ import main
from jpcli.config_files import STARTER, user_config_path

from jpd.config import load_config
from jpd.config.loader import user_config_path as jpd_user_config_path


def test_user_config_path_matches_jpd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JP_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert user_config_path(os.environ) == str(jpd_user_config_path(os.environ))
    monkeypatch.setenv("JP_CONFIG", str(tmp_path / "mine.toml"))
    assert user_config_path(os.environ) == str(jpd_user_config_path(os.environ))


def test_init_writes_a_valid_starter_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "conf" / "config.toml"
    monkeypatch.setenv("JP_CONFIG", str(target))
    assert main(["config", "init"]) == 0
    assert target.read_text() == STARTER
    load_config(env={"JP_CONFIG": str(target)})  # the starter is valid config
    assert main(["config", "init"]) == 1
    assert "not overwritten" in capsys.readouterr().err
    assert main(["config", "init", "--force"]) == 0

    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["config", "path"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"user:      {target}"
    assert lines[1] == f"workspace: {tmp_path / '.jp' / 'config.toml'}  (absent)"
