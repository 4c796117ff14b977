"""The config cache: unchanged files are neither parsed nor validated again, any change
(content, a file appearing or going, a file changed while it is still recent) is read
on the next load, and the result is always the one `load_config` gives."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import jpd.config.cache as cache_module
import jpd.config.loader as loader
from jpd.config import ConfigError, load_config
from jpd.config.cache import ConfigCache
from jpd.core.configs import RequestConfigs
from jpd.core.request_env import RequestEnv
from jpd.protocol.errors import ConfigInvalid


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every config file parsed, in order."""
    seen: list[Path] = []
    real = loader.parse_toml_layer

    def counting(path: Path, raw: bytes) -> dict[str, object]:
        seen.append(path)
        return real(path, raw)

    monkeypatch.setattr(loader, "parse_toml_layer", counting)
    return seen


@pytest.fixture
def trust_stamps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written by the test are trusted by their times at once (in real use a file
    is trusted by its times once it is 2 s old, and by its content until then: see
    `test_a_recent_file_is_known_by_its_content`)."""
    monkeypatch.setattr(cache_module, "RECENT_NS", 0)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    user = tmp_path / "user.toml"
    user.write_text('[assistant]\nsystem_prompt = "user one"\n')
    workspace = tmp_path / "ws"
    (workspace / ".jp").mkdir(parents=True)
    return user, workspace, {"JP_CONFIG": str(user)}


def workspace_file(workspace: Path) -> Path:
    return workspace / ".jp" / "config.toml"


@pytest.mark.usefixtures("trust_stamps")
def test_unchanged_files_are_not_read_again(
    files: tuple[Path, Path, dict[str, str]], reads: list[Path]
) -> None:
    _user, workspace, env = files
    workspace_file(workspace).write_text("[assistant.model.parameters]\nmax_tokens = 7\n")
    cache = ConfigCache()
    first = cache.load(workspace=workspace, env=env)
    assert len(reads) == 2
    assert cache.load(workspace=workspace, env=env) is first
    assert cache.cached(workspace, env) is first
    assert len(reads) == 2
    assert first == load_config(workspace=workspace, env=env)
    assert first.assistant.system_prompt == "user one"
    assert first.assistant.model.parameters.max_tokens == 7


@pytest.mark.usefixtures("trust_stamps")
def test_a_changed_file_is_read_on_the_next_load(
    files: tuple[Path, Path, dict[str, str]], reads: list[Path]
) -> None:
    user, workspace, env = files
    cache = ConfigCache()
    assert cache.load(workspace=workspace, env=env).assistant.system_prompt == "user one"
    # The same size and, set back, the same modification time: the change time differs
    # (once the filesystem's clock has moved on: the trust_stamps fixture skips that wait).
    stat = user.stat()
    time.sleep(0.05)
    user.write_text('[assistant]\nsystem_prompt = "user two"\n')
    os.utime(user, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert cache.cached(workspace, env) is None
    assert cache.load(workspace=workspace, env=env).assistant.system_prompt == "user two"
    # Replaced by another file (a new inode), as editors save.
    replacement = user.with_suffix(".new")
    replacement.write_text('[assistant]\nsystem_prompt = "user three, longer"\n')
    replacement.replace(user)
    assert cache.load(workspace=workspace, env=env).assistant.system_prompt == "user three, longer"
    assert reads.count(user) == 3


@pytest.mark.usefixtures("trust_stamps")
def test_a_file_that_appears_or_goes_is_noticed(files: tuple[Path, Path, dict[str, str]]) -> None:
    user, workspace, env = files
    cache = ConfigCache()
    assert cache.load(workspace=workspace, env=env).assistant.system_prompt == "user one"
    workspace_file(workspace).write_text('[assistant]\nsystem_prompt = "workspace"\n')
    assert cache.load(workspace=workspace, env=env).assistant.system_prompt == "workspace"
    workspace_file(workspace).unlink()
    user.unlink()
    assert cache.load(workspace=workspace, env=env).assistant.system_prompt is None


def test_a_recent_file_is_known_by_its_content(
    files: tuple[Path, Path, dict[str, str]], reads: list[Path]
) -> None:
    # Two writes within one tick of a coarse filesystem clock can leave the same times:
    # a file changed in the last 2 s is known by its content, not by its times alone.
    user, workspace, env = files
    cache = ConfigCache()
    first = cache.load(workspace=workspace, env=env)
    assert first.assistant.system_prompt == "user one"
    assert cache.cached(workspace, env) is first  # unchanged: not parsed again
    assert cache.load(workspace=workspace, env=env) is first
    assert reads.count(user) == 1
    stat = user.stat()
    with open(user, "r+b") as f:  # the same inode and size
        f.write(b'[assistant]\nsystem_prompt = "user 1!!"\n')
    os.utime(user, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert cache.cached(workspace, env) is None
    assert cache.load(workspace=workspace, env=env).assistant.system_prompt == "user 1!!"
    assert reads.count(user) == 2


@pytest.mark.usefixtures("trust_stamps")
def test_overrides_are_applied_on_the_kept_layers(
    files: tuple[Path, Path, dict[str, str]], reads: list[Path]
) -> None:
    user, workspace, env = files
    cache = ConfigCache()
    overrides = [("turn/start config", {"assistant": {"system_prompt": "turn"}})]
    expected = load_config(workspace=workspace, env=env, overrides=overrides)
    for _ in range(2):
        got = cache.load(workspace=workspace, env=env, overrides=overrides)
        assert got == expected
        assert got.assistant.system_prompt == "turn"
    assert reads.count(user) == 2  # once by load_config, once by the cache
    assert cache.load(workspace=workspace, env=env).assistant.system_prompt == "user one"


@pytest.mark.usefixtures("trust_stamps")
def test_a_bad_file_is_reported_every_time_until_fixed(
    files: tuple[Path, Path, dict[str, str]],
) -> None:
    user, workspace, env = files
    user.write_text('[daemon]\nidle_timeout = "soon"\n')
    cache = ConfigCache()
    for _ in range(2):
        with pytest.raises(ConfigError) as info:
            cache.load(workspace=workspace, env=env)
        assert info.value.errors[0]["line"] == "2"
    user.write_text("[daemon]\nidle_timeout = 5\n")
    assert cache.load(workspace=workspace, env=env).daemon.idle_timeout == 5


@pytest.mark.usefixtures("trust_stamps")
async def test_a_request_sees_the_config_file_as_it_is_now(
    files: tuple[Path, Path, dict[str, str]],
) -> None:
    user, workspace, env = files
    configs = RequestConfigs({})
    renv = RequestEnv(workspace, env)
    first = await configs.for_request(renv)
    assert await configs.for_request(renv) is first
    user.write_text('[assistant]\nsystem_prompt = "edited"\n')
    assert (await configs.for_turn(renv, None, None)).assistant.system_prompt == "edited"
    turn = await configs.for_turn(renv, {"assistant": {"system_prompt": "sent"}}, None)
    assert turn.assistant.system_prompt == "sent"
    user.write_text("[assistant\n")
    with pytest.raises(ConfigInvalid) as info:
        await configs.for_request(renv)
    assert str(user) in info.value.message
    nothing = {"JP_CONFIG": str(user.parent / "absent.toml")}
    assert configs.load(None, env=nothing).assistant.system_prompt is None


def test_a_recent_file_is_kept_under_the_bytes_parsed(
    files: tuple[Path, Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The file changes between its stamp and its read, on a filesystem whose clock has
    # not moved (every write keeps the times): the layer read must be kept under the
    # content it was read from, not under the content stamped before.
    user, workspace, env = files
    real_stamp, real_read = cache_module.stamp, loader.read_config_bytes

    def frozen_clock(path: Path) -> cache_module.Stamp | None:
        found = real_stamp(path)
        return found._replace(mtime_ns=0, ctime_ns=0) if found else found

    def edited_meanwhile(path: Path) -> bytes | None:
        if path == user:
            user.write_text('[assistant]\nsystem_prompt = "user two"\n')  # the same size
        return real_read(path)

    monkeypatch.setattr(cache_module, "stamp", frozen_clock)
    monkeypatch.setattr(cache_module, "read_config_bytes", edited_meanwhile)
    cache = ConfigCache()
    assert cache.load(workspace=workspace, env=env).assistant.system_prompt == "user two"
    monkeypatch.setattr(cache_module, "read_config_bytes", real_read)
    user.write_text('[assistant]\nsystem_prompt = "user one"\n')  # back as first stamped
    assert cache.load(workspace=workspace, env=env).assistant.system_prompt == "user one"
    assert cache.load(workspace=workspace, env=env).assistant.system_prompt == "user one"


def test_stamps_tell_absent_recent_and_unreadable_files_apart(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    assert cache_module.stamp(path) == cache_module.ABSENT
    path.write_text("")
    recent = cache_module.stamp(path)  # just written: known by its content too
    assert recent is not None and recent.digest == cache_module.digest(b"")
    path.write_text("x = 1\n")
    assert cache_module.stamp(path) != recent
    (tmp_path / "dir.toml").mkdir()
    assert cache_module.stamp(tmp_path / "dir.toml") is None  # recent, not a regular file
    assert cache_module.stamp(tmp_path / "not-a-dir" / "x") == cache_module.ABSENT
    (tmp_path / "file").write_text("")
    assert cache_module.stamp(tmp_path / "file" / "config.toml") is None  # ENOTDIR
