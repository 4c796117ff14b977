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
