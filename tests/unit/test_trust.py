"""Workspace config trust: the daemon's reader (jpd/config/trust.py) and `jp trust`'s
writer (clients/jpcli/trust.py) agree, a changed file needs trust again, and the
layered config and its cache ignore an untrusted workspace file."""

from __future__ import annotations

import io
import os
from pathlib import Path

from jpcli import trust as cli_trust

from jpd.config.cache import ConfigCache
from jpd.config.loader import load_config
from jpd.config.trust import is_trusted, trust_store_path

CHECKS_TRUST = True  # tests/unit/conftest.py: workspace files are not trusted by default


def setup(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    user = tmp_path / "user.toml"
    user.write_text('[assistant]\nsystem_prompt = "user"\n')
    workspace = tmp_path / "ws"
    (workspace / ".jp").mkdir(parents=True)
    ws_file = workspace / ".jp" / "config.toml"
    ws_file.write_text('[assistant]\nsystem_prompt = "workspace"\n')
    env = {"JP_CONFIG": str(user), "JP_STATE_DIR": str(tmp_path / "state"), "HOME": "/nowhere"}
    return env, workspace, ws_file


def test_an_untrusted_workspace_file_is_ignored_until_trusted(tmp_path: Path) -> None:
    env, workspace, ws_file = setup(tmp_path)
    assert load_config(workspace=workspace, env=env).assistant.system_prompt == "user"
    cli_trust.trust(str(ws_file), env)
    assert load_config(workspace=workspace, env=env).assistant.system_prompt == "workspace"
    cli_trust.revoke(str(ws_file), env)
    assert load_config(workspace=workspace, env=env).assistant.system_prompt == "user"


def test_a_changed_file_needs_trust_again(tmp_path: Path) -> None:
    env, workspace, ws_file = setup(tmp_path)
    cli_trust.trust(str(ws_file), env)
    ws_file.write_text('[assistant]\nsystem_prompt = "after a git pull"\n')
    assert not is_trusted(ws_file, ws_file.read_bytes(), env)
    assert not cli_trust.is_trusted(str(ws_file), env)
    assert load_config(workspace=workspace, env=env).assistant.system_prompt == "user"


def test_trust_is_keyed_on_the_real_path(tmp_path: Path) -> None:
    env, workspace, ws_file = setup(tmp_path)
    cli_trust.trust(str(ws_file), env)
    # The same content elsewhere (another clone, or a link to the trusted file's copy)
    # is not trusted by the first one's entry.
    other = tmp_path / "other"
    (other / ".jp").mkdir(parents=True)
    (other / ".jp" / "config.toml").write_bytes(ws_file.read_bytes())
    assert load_config(workspace=other, env=env).assistant.system_prompt == "user"
    # A link to a trusted workspace resolves to it.
    link = tmp_path / "link"
    link.symlink_to(workspace)
    assert load_config(workspace=link, env=env).assistant.system_prompt == "workspace"


def test_the_store_is_the_users_not_the_workspaces(tmp_path: Path) -> None:
    env, _, _ = setup(tmp_path)
    assert trust_store_path(env) == tmp_path / "state" / "trusted.json"
    assert cli_trust.store_path(env) == str(trust_store_path(env))
    # XDG default, as `jp` keeps current.json.
    xdg = {"XDG_STATE_HOME": str(tmp_path / "xdg")}
    assert trust_store_path(xdg) == tmp_path / "xdg" / "jp" / "trusted.json"
    assert cli_trust.store_path(xdg) == str(trust_store_path(xdg))


def test_a_damaged_or_forged_store_trusts_nothing(tmp_path: Path) -> None:
    env, workspace, ws_file = setup(tmp_path)
    store = trust_store_path(env)
    store.parent.mkdir(parents=True)
    for text in ("not json", "[1, 2]", f'{{"{os.path.realpath(ws_file)}": 42}}', ""):
        store.write_text(text)
        assert load_config(workspace=workspace, env=env).assistant.system_prompt == "user"
    # A hash of other content does not do.
    store.write_text(f'{{"{os.path.realpath(ws_file)}": "{"0" * 64}"}}')
    assert load_config(workspace=workspace, env=env).assistant.system_prompt == "user"


def test_the_cache_sees_trust_given_and_revoked(tmp_path: Path) -> None:
    env, workspace, ws_file = setup(tmp_path)
    cache = ConfigCache()
    assert cache.load(workspace=workspace, env=env).assistant.system_prompt == "user"
    assert cache.load(workspace=workspace, env=env).assistant.system_prompt == "user"
    cli_trust.trust(str(ws_file), env)
    assert cache.load(workspace=workspace, env=env).assistant.system_prompt == "workspace"
    cached = cache.cached(workspace, env)
    assert cached is not None and cached.assistant.system_prompt == "workspace"
    cli_trust.revoke(str(ws_file), env)
    assert cache.cached(workspace, env) is None
    assert cache.load(workspace=workspace, env=env).assistant.system_prompt == "user"


def test_jp_announces_an_untrusted_workspace_config(tmp_path: Path) -> None:
    env, workspace, ws_file = setup(tmp_path)
    out = io.StringIO()
    cli_trust.announce_untrusted(env, str(workspace), out)
    assert out.getvalue() == (
        f"jp: ignoring untrusted workspace config {ws_file} (run `jp trust` to use it)\n"
    )
    cli_trust.trust(str(workspace / ".jp" / "config.toml"), env)
    quiet = io.StringIO()
    cli_trust.announce_untrusted(env, str(workspace), quiet)
    cli_trust.announce_untrusted(env, str(tmp_path), quiet)  # no config: nothing to say
    assert quiet.getvalue() == ""


def test_trusting_a_missing_file_fails(tmp_path: Path) -> None:
    env, _, _ = setup(tmp_path)
    try:
        cli_trust.trust(str(tmp_path / "nope.toml"), env)
    except FileNotFoundError:
        pass
    else:
        raise AssertionError("trusted a file that does not exist")
    assert not trust_store_path(env).exists()
