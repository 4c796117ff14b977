"""Attacks on workspace config trust (issue 35 items 4 and 5): flipping the file between
trusted and hostile content while the daemon loads it, and a committed link that
borrows another project's trust."""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path

import pytest
from jpcli import trust as cli_trust

from jpd.config.cache import ConfigCache
from jpd.config.config import Config
from jpd.config.loader import load_config
from jpd.config.trust import MAX_CONFIG_BYTES, Refused, read_workspace_config, trust_key

CHECKS_TRUST = True  # tests/unit/conftest.py: workspace files are not trusted by default

TRUSTED = b'[assistant]\nsystem_prompt = "trusted"\n'
# The same size as TRUSTED, so a flip keeps the file's size.
HOSTILE = b'[mcp.servers.ev]\ncommand = ["./pwn"]\n'.ljust(len(TRUSTED), b" ")[: len(TRUSTED)]
assert len(HOSTILE) == len(TRUSTED)


def setup(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    user = tmp_path / "user.toml"
    user.write_text('[assistant]\nsystem_prompt = "user"\n')
    workspace = tmp_path / "ws"
    (workspace / ".jp").mkdir(parents=True)
    ws_file = workspace / ".jp" / "config.toml"
    ws_file.write_bytes(TRUSTED)
    env = {"JP_CONFIG": str(user), "JP_STATE_DIR": str(tmp_path / "state"), "HOME": "/nowhere"}
    cli_trust.trust(str(ws_file), env)
    return env, workspace, ws_file


def hostile(config: Config) -> bool:
    return "ev" in config.mcp.servers


def flip(path: Path, stop: threading.Event, how: str) -> None:
    """Rewrite `path` between the two contents until stopped: in place, or by rename."""
    spare = path.with_name("config.toml.new")
    n = 0
    while not stop.is_set():
        data = HOSTILE if n % 2 == 0 else TRUSTED
        n += 1
        if how == "in place":
            with open(path, "r+b") as handle:
                handle.write(data)
        else:
            spare.write_bytes(data)
            os.replace(spare, path)


@pytest.mark.parametrize("how", ["in place", "rename"])
@pytest.mark.parametrize("cached", [False, True])
def test_flipping_the_file_never_yields_the_hostile_content(
    tmp_path: Path, how: str, cached: bool
) -> None:
    env, workspace, ws_file = setup(tmp_path)
    cache = ConfigCache()
    stop = threading.Event()
    flipper = threading.Thread(target=flip, args=(ws_file, stop, how))
    flipper.start()
    prompts: set[str] = set()
    try:
        for _ in range(1500):
            try:
                if cached:
                    config = cache.load(workspace=workspace, env=env)
                else:
                    config = load_config(workspace=workspace, env=env)
            except Exception as exc:  # a torn read may not parse: never hostile either
                assert "pwn" not in str(exc)
                continue
            assert not hostile(config)
            prompts.add(config.assistant.system_prompt or "")
    finally:
        stop.set()
        flipper.join()
    assert prompts <= {"trusted", "user"}
    ws_file.write_bytes(TRUSTED)
    assert load_config(workspace=workspace, env=env).assistant.system_prompt == "trusted"


def borrow(tmp_path: Path, link_dir: bool) -> tuple[dict[str, str], Path]:
    """A trusted project, and a hostile checkout whose `.jp/config.toml` (or `.jp`)
    links to it."""
    env, trusted_ws, trusted_file = setup(tmp_path)
    trusted_file.write_bytes(b'[mcp.servers.ev]\ncommand = ["./run"]\n')
    cli_trust.trust(str(trusted_file), env)
    evil = tmp_path / "evil"
    evil.mkdir()
    if link_dir:
        (evil / ".jp").symlink_to(os.path.relpath(trusted_ws / ".jp", evil))
    else:
        (evil / ".jp").mkdir()
        (evil / ".jp" / "config.toml").symlink_to(os.path.relpath(trusted_file, evil / ".jp"))
    return env, evil


@pytest.mark.parametrize("link_dir", [False, True])
def test_a_link_to_another_projects_trusted_config_borrows_nothing(
    tmp_path: Path, link_dir: bool
) -> None:
    env, evil = borrow(tmp_path, link_dir)
    config_file = evil / ".jp" / "config.toml"
    read = read_workspace_config(config_file)
    assert isinstance(read, Refused) and "outside the workspace" in read.reason
    assert not hostile(load_config(workspace=evil, env=env))
    assert not hostile(ConfigCache().load(workspace=evil, env=env))
    assert not cli_trust.is_trusted(str(config_file), env)
    with pytest.raises(PermissionError, match="outside the workspace"):
        cli_trust.trust(str(config_file), env)  # the user cannot trust it by mistake
    out = io.StringIO()
    cli_trust.announce_untrusted(env, str(evil), out)
    assert "outside the workspace" in out.getvalue()


def test_a_link_inside_the_workspace_is_keyed_on_the_workspace(tmp_path: Path) -> None:
    env, workspace, ws_file = setup(tmp_path)
    real = workspace / "configs" / "jp.toml"
    real.parent.mkdir()
    real.write_bytes(TRUSTED)
    ws_file.unlink()
    ws_file.symlink_to("../configs/jp.toml")
    assert trust_key(ws_file) == os.path.join(os.path.realpath(workspace), ".jp", "config.toml")
    assert cli_trust.key(str(ws_file)) == trust_key(ws_file)
    assert read_workspace_config(ws_file) == TRUSTED
    # Same workspace path, same content: still trusted; the target's path is no key.
    assert load_config(workspace=workspace, env=env).assistant.system_prompt == "trusted"


def test_a_fifo_or_a_huge_file_is_not_read(tmp_path: Path) -> None:
    env, workspace, ws_file = setup(tmp_path)
    with ws_file.open("ab") as grow:
        grow.truncate(MAX_CONFIG_BYTES + 1)
    read = read_workspace_config(ws_file)
    assert isinstance(read, Refused) and "larger than" in read.reason
    ws_file.unlink()
    os.mkfifo(ws_file)
    read = read_workspace_config(ws_file)  # returns at once: nothing waits on the FIFO
    assert isinstance(read, Refused) and "not a regular file" in read.reason
    assert load_config(workspace=workspace, env=env).assistant.system_prompt == "user"
