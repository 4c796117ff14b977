"""`jpcli.paths` re-derives with the standard library what `jpd` gets from platformdirs
(the client must start without importing it): every path it computes is compared with
platformdirs' answer, and with the daemon's own, under each XDG setup, so they cannot drift.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import platformdirs
import pytest
from jpcli import paths

from jpd.__main__ import log_dir as jpd_log_dir
from jpd.rpc.socket_claim import default_socket_path
from jpd.settings import Settings

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"),
    reason="the stdlib port is Linux's; others ask platformdirs",
)

RUNTIME = ["unset", "private", "0755", "relative", "missing", "/tmp"]
HOMES = ["unset", "absolute", "relative"]  # XDG_DATA_HOME and XDG_STATE_HOME


def _platformdirs(name: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallback from XDG_RUNTIME_DIR warns
        return str(getattr(platformdirs, name)("jp"))


def _set(monkeypatch: pytest.MonkeyPatch, name: str, value: str | None) -> None:
    if value is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("state", HOMES)
@pytest.mark.parametrize("data", HOMES)
@pytest.mark.parametrize("runtime", RUNTIME)
def test_every_path_matches_platformdirs_and_the_daemon(
    runtime: str, data: str, state: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("JP_SOCKET", "JP_DATA_DIR", "JP_LOG_DIR"):
        monkeypatch.delenv(name, raising=False)
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    os.chmod(xdg, 0o755 if runtime == "0755" else 0o700)
    runtimes = {
        "unset": None,
        "private": str(xdg),
        "0755": str(xdg),
        "relative": "rel/run",
        "missing": str(xdg / "missing"),
        "/tmp": "/tmp",
    }
    _set(monkeypatch, "XDG_RUNTIME_DIR", runtimes[runtime])
    homes = {"unset": None, "absolute": str(tmp_path / "{}"), "relative": "rel/{}"}
    for var, choice, leaf in (("XDG_DATA_HOME", data, "share"), ("XDG_STATE_HOME", state, "st")):
        value = homes[choice]
        _set(monkeypatch, var, None if value is None else value.format(leaf))
    env = dict(os.environ)

    assert paths.runtime_dir(env) == _platformdirs("user_runtime_dir")
    assert paths.default_data_dir(env) == _platformdirs("user_data_dir")
    assert paths.data_dir(env) == _platformdirs("user_data_dir")
    assert paths.log_dir(env) == _platformdirs("user_log_dir")
    # ... and what the daemon derives from them.
    assert paths.data_dir(env) == str(Settings.from_env(env).data_dir)
    assert paths.log_file(env) == str(jpd_log_dir(env) / paths.LOG_NAME)
    assert paths.socket_path(env) == str(default_socket_path(env))


@pytest.mark.parametrize("data", ["~/somewhere", "/abs/data"])
def test_an_explicit_data_dir_gets_the_daemons_socket(
    data: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.delenv("JP_SOCKET", raising=False)
    env = {**os.environ, "JP_DATA_DIR": data}
    assert paths.data_dir(env) == os.path.abspath(os.path.expanduser(data))
    assert paths.socket_path(env) == str(default_socket_path(env))
