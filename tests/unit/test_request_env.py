"""Per-request client environment (protocol.md 5.5): how a request's env and cwd combine
with the daemon's, providers keyed by the variables they read, and the per-data-dir
socket that `jp` and `jpd` compute alike (2.1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from jpcli import paths

from jpd.config import Config
from jpd.core.request_env import request_env
from jpd.llm.errors import ProviderUnavailable
from jpd.llm.registry import ProviderRegistry
from jpd.protocol.environment import ClientEnvironment
from jpd.protocol.turn_requests import TurnStartParams
from jpd.rpc.socket_claim import default_socket_path

DAEMON = {"JP_CONFIG": "/daemon.toml", "ANTHROPIC_API_KEY": "daemon-key"}


def test_no_environment_means_the_daemons() -> None:
    env = request_env(None, Path("/ws"), DAEMON)
    assert (env.workspace, dict(env.env)) == (Path("/ws"), DAEMON)


def test_a_sent_env_replaces_the_daemons_entirely() -> None:
    sent = ClientEnvironment(cwd="/client", env={"JP_CONFIG": "/client.toml"})
    env = request_env(sent, Path("/ws"), DAEMON)
    assert env.workspace == Path("/client") and env.root == Path("/client")
    assert dict(env.env) == {"JP_CONFIG": "/client.toml"}  # no daemon key inherited
    only_cwd = request_env(ClientEnvironment(cwd="/c"), None, DAEMON)
    assert (only_cwd.workspace, dict(only_cwd.env)) == (Path("/c"), DAEMON)


def test_environment_is_validated_and_never_in_reprs() -> None:
    with pytest.raises(ValueError, match="absolute"):
        ClientEnvironment(cwd="relative/dir")
    params = TurnStartParams.model_validate(
        {"message": "hi", "environment": {"env": {"KEY": "hidden-value"}}}
    )
    assert "hidden-value" not in repr(params)
    assert "hidden-value" not in repr(request_env(params.environment, None, {}))


def _anthropic() -> Config:
    return Config.model_validate({"assistant": {"model": {"id": "anthropic/claude-x"}}})


def test_providers_read_keys_from_the_request_env() -> None:
    registry = ProviderRegistry(DAEMON)
    daemons = registry.get(_anthropic())
    assert registry.get(_anthropic()) is daemons  # cached
    assert registry.bound(None).get(_anthropic()) is daemons
    other = registry.get(_anthropic(), {"ANTHROPIC_API_KEY": "client-key", "UNRELATED": "x"})
    assert other is not daemons
    assert registry.get(_anthropic(), {"ANTHROPIC_API_KEY": "client-key"}) is other
    with pytest.raises(ProviderUnavailable, match="ANTHROPIC_API_KEY"):
        registry.bound({"PATH": "/bin"}).get(_anthropic())


@pytest.mark.parametrize("data", ["", "~/somewhere", "/abs/data", "rel/data"])
def test_jp_and_jpd_agree_on_the_socket_of_a_data_dir(
    data: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    env = {**os.environ, "JP_DATA_DIR": data}
    assert paths.socket_path(env) == str(default_socket_path(env))
    expected = "jpd.sock" if not data else "jpd-"
    assert os.path.basename(paths.socket_path(env)).startswith(expected)
    # The default data dir spelled out is still the default daemon.
    default = {**env, "JP_DATA_DIR": str(tmp_path / "share" / "jp")}
    assert os.path.basename(paths.socket_path(default)) == "jpd.sock"
    assert default_socket_path(default).name == "jpd.sock"


def test_additional_roots_are_absolute_and_reach_the_request_env() -> None:
    sent = ClientEnvironment.model_validate(
        {"cwd": "/ws", "additionalRoots": ["/lib/shared/", "/other/../docs"]}
    )
    renv = request_env(sent, None, {})
    assert renv.workspace == Path("/ws")
    assert renv.extra_roots == (Path("/lib/shared"), Path("/docs"))
    assert request_env(None, Path("/ws"), {}).extra_roots == ()
    with pytest.raises(ValueError, match="must be an absolute path"):
        ClientEnvironment.model_validate({"additionalRoots": ["relative/dir"]})


async def test_builtins_see_the_additional_roots() -> None:
    from jpd.core.turn_tools import make_coordinator
    from jpd.tools.builtin import BuiltinContext
    from jpd.tools.outcome import Success
    from tests.unit.fakes import Clients, FakeBackend, FakeLog
    from tests.unit.test_coordinator import Asker, call, effective

    seen: list[BuiltinContext] = []

    class Looker(Asker):
        async def run(self, arguments, answers, ctx):  # type: ignore[no-untyped-def]
            seen.append(ctx)
            return Success(content="ok")

    coord = make_coordinator(
        tools={"look": effective(Looker("look", []))},
        pending=Clients([]).pending(),
        log=FakeLog(),
        backend=FakeBackend("x"),
        conversation_id="c",
        turn_id="t",
        root=Path("/ws"),
        env={},
        detached="deny",
        extra_roots=(Path("/lib"),),
        mode="auto",
    )
    assert await coord.run_one(call("look")) == ("ok", False)
    assert seen[0].root == Path("/ws") and seen[0].extra_roots == (Path("/lib"),)
    assert seen[0].mode == "auto"  # a command runner sandboxes what nobody approves
