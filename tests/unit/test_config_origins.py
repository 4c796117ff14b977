"""`config_origins`: the layer each effective key came from, secrets redacted."""

from __future__ import annotations

from pathlib import Path

from jpd.config.origins import REDACTED, config_origins, is_secret


def test_origins_of_every_layer(tmp_path: Path) -> None:
    user = tmp_path / "user.toml"
    user.write_text(
        '[assistant.model]\nid = "anthropic/x"\n'
        '[conversation.tools."a.b"]\nrun = "ask"\ncommand = "true"\n'
    )
    workspace = tmp_path / "ws"
    (workspace / ".jp").mkdir(parents=True)
    (workspace / ".jp" / "config.toml").write_text('[assistant]\nsystem_prompt = "ws"\n')
    overrides = [("-c", {"assistant": {"model": {"parameters": {"max_tokens": 5}}}})]
    rows = {
        key: (value, origin)
        for key, value, origin, _ in config_origins(
            workspace=workspace, env={"JP_CONFIG": str(user)}, overrides=overrides
        )
    }
    assert rows["assistant.model.id"] == ("anthropic/x", str(user))
    assert rows["assistant.system_prompt"] == ("ws", str(workspace / ".jp" / "config.toml"))
    assert rows["assistant.model.parameters.max_tokens"] == (5, "-c")
    assert rows["daemon.replay_buffer"] == (10000, "default")
    assert rows["conversation.tools.'a.b'.run"] == ("ask", str(user))


def test_secret_keys() -> None:
    assert is_secret(("mcp", "servers", "x", "env", "HOME"))
    assert is_secret(("mcp", "servers", "x", "headers", "X-Api"))
    assert is_secret(("providers", "x", "api_key"))
    assert not is_secret(("providers", "openai", "api_key_env"))
    assert REDACTED == "<redacted>"
