"""One rule for paths across `jp`, `jp acp` and the Neovim plugin (issue 31 point 5):
the socket a data dir's daemon listens on, and the workspace config file the daemon
reads for a client (`<cwd>/.jp/config.toml`, the cwd being the workspace root sent)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from jpcli import paths
from jpcli import trust as cli_trust
from jpcli.__main__ import main
from jpcli.acp.inputs import absolute_path
from jpcli.daemon import SocketDaemon

from jpd.config.loader import workspace_config_path
from jpd.rpc.socket_claim import default_socket_path

ROOT = Path(__file__).resolve().parents[2]
NVIM = shutil.which("nvim", path=str(Path(sys.executable).parent)) or shutil.which("nvim")


def nvim_socket(env: dict[str, str], cwd: Path) -> str:
    script = cwd / "socket.lua"
    script.write_text(
        f"vim.opt.rtp:prepend({str(ROOT / 'clients' / 'nvim')!r})\n"
        'io.write(require("jp.paths").socket())\n'
    )
    assert NVIM is not None
    done = subprocess.run(
        [NVIM, "--clean", "--headless", "-l", str(script)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


@pytest.mark.skipif(NVIM is None, reason="nvim not installed (test extra)")
@pytest.mark.parametrize("data_dir", ["", "{tmp}/data", "rel/data", "{tmp}/data/", "DEFAULT"])
def test_jp_jpd_and_neovim_pick_the_same_socket(
    tmp_path: Path, data_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))  # platformdirs reads os.environ
    env = {k: v for k, v in os.environ.items() if k != "JP_SOCKET"}
    if data_dir == "DEFAULT":
        data_dir = str(tmp_path / "xdg" / "jp")
    env["JP_DATA_DIR"] = data_dir.format(tmp=tmp_path)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)  # relative JP_DATA_DIR values resolve against the cwd
    expected = paths.socket_path(env)
    assert str(default_socket_path(env)) == expected
    assert nvim_socket(env, cwd) == expected
    if data_dir in ("", str(tmp_path / "xdg" / "jp")):
        assert expected.endswith("/jpd.sock")
    else:
        assert "/jpd-" in expected


def test_every_client_names_the_workspace_file_the_daemon_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A repository whose root has .git and .jp, opened in a subdirectory: the daemon
    # reads <cwd>/.jp/config.toml, and so every client names that one.
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".jp").mkdir()
    sub = repo / "src"
    sub.mkdir()
    monkeypatch.chdir(sub)
    monkeypatch.setenv("JP_CONFIG", str(tmp_path / "user.toml"))
    daemon_reads = workspace_config_path(Path(SocketDaemon().workspace_root))
    assert daemon_reads == sub / ".jp" / "config.toml"
    assert cli_trust.workspace_config(os.getcwd()) == str(daemon_reads)
    assert workspace_config_path(Path(absolute_path(str(sub)))) == daemon_reads  # jp acp
    assert main(["config", "path"]) == 0
    assert f"workspace: {daemon_reads}  (absent)" in capsys.readouterr().out
