"""The Neovim plugin asks "Trust this workspace's config?" and keeps trust in the same
store, the same way, as `jp trust` and the daemon (clients/nvim/lua/jp/trust.lua)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from jpcli import trust as cli_trust

from jpd.config.trust import is_trusted

CHECKS_TRUST = True
ROOT = Path(__file__).resolve().parents[2]
NVIM = shutil.which("nvim", path=str(Path(sys.executable).parent)) or shutil.which("nvim")
SCRIPT = """
vim.opt.rtp:prepend(vim.env.JP_PLUGIN)
local trust = require("jp.trust")
local path = vim.env.WS .. "/.jp/config.toml"
local before = trust.untrusted(path)
vim.ui.select = function(items, opts, done)
  io.write(opts.prompt .. "\\n")
  done(vim.env.CHOICE)
end
vim.fn.chdir(vim.env.WS)
trust.offer(function() end)
io.write(tostring(before) .. " " .. tostring(trust.untrusted(path)) .. "\\n")
"""


def run(tmp_path: Path, ws: Path, choice: str) -> list[str]:
    script = tmp_path / "trust.lua"
    script.write_text(SCRIPT)
    assert NVIM is not None
    env = {
        **os.environ,
        "JP_STATE_DIR": str(tmp_path / "state"),
        "WS": str(ws),
        "CHOICE": choice,
        "JP_PLUGIN": str(ROOT / "clients" / "nvim"),
    }
    done = subprocess.run(
        [NVIM, "--clean", "--headless", "-l", str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.splitlines()


@pytest.mark.skipif(NVIM is None, reason="nvim not installed (test extra)")
def test_neovim_asks_and_trusts_as_jp_does(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".jp").mkdir(parents=True)
    config = ws / ".jp" / "config.toml"
    config.write_text('[assistant]\nsystem_prompt = "ws"\n')
    env = {"JP_STATE_DIR": str(tmp_path / "state")}

    ignored = run(tmp_path, ws, "Ignore it")
    assert ignored[0].startswith("[jp] Trust this workspace's config? ")
    assert ignored[1] == "true true"
    assert not cli_trust.is_trusted(str(config), env)

    trusted = run(tmp_path, ws, "Trust it")
    assert trusted[1] == "true false"
    assert cli_trust.is_trusted(str(config), env)
    assert is_trusted(config, config.read_bytes(), env)  # the daemon agrees

    config.write_text('[assistant]\nsystem_prompt = "changed"\n')
    assert run(tmp_path, ws, "Ignore it")[1] == "true true"  # changed: asked again
    cli_trust.trust(str(config), env)
    assert run(tmp_path, ws, "Ignore it") == ["false false"]  # jp's trust: not asked


CHECK = """
vim.opt.rtp:prepend(vim.env.JP_PLUGIN)
local paths = require("jp.paths")
io.write(tostring(paths.socket_problem(vim.env.SOCK)) .. "\\n")
"""


@pytest.mark.skipif(NVIM is None, reason="nvim not installed (test extra)")
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown to another uid")
def test_neovim_refuses_a_socket_that_is_not_the_users(tmp_path: Path) -> None:
    import socket

    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    path = folder / "jpd.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        script = tmp_path / "check.lua"
        script.write_text(CHECK)
        assert NVIM is not None

        def check() -> str:
            env = {**os.environ, "SOCK": str(path), "JP_PLUGIN": str(ROOT / "clients" / "nvim")}
            done = subprocess.run(
                [NVIM, "--clean", "--headless", "-l", str(script)],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
            return done.stdout.strip()

        assert check() == "nil"
        folder.chmod(0o777)
        assert "can be written by other users" in check()
        folder.chmod(0o700)
        os.chown(path, 65534, 65534)
        assert "belongs to uid 65534" in check()
