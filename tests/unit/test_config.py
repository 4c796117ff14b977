"""Config layers, errors, paths and `-c` assignments (`jpd.config`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from jpd.config import (
    Config,
    ConfigError,
    PartialAssistantConfig,
    load_config,
    parse_assignment,
    user_config_path,
)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def user_file(tmp_path: Path) -> Path:
    """Where the user layer lives for a test; not created until a test writes it."""
    return tmp_path / "user" / "config.toml"


@pytest.fixture
def env(user_file: Path) -> dict[str, str]:
    return {"JP_CONFIG": str(user_file)}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def ws_file(workspace: Path, text: str) -> Path:
    return write(workspace / ".jp" / "config.toml", text)


# --- defaults ------------------------------------------------------------------------


def test_defaults_without_any_file(env: dict[str, str], workspace: Path) -> None:
    config = load_config(workspace=workspace, env=env)

    assert config == Config()
    assert config.assistant.model.id == "local/smollm2"
    assert config.assistant.model.provider == "local"
    assert config.assistant.model.name == "smollm2"
    assert config.assistant.reasoning.effort == "off"
    assert config.providers.local.n_ctx == 2048
    assert config.providers.anthropic.api_key_env == "ANTHROPIC_API_KEY"
    assert config.providers.openai.api_key_env == "OPENAI_API_KEY"
    assert config.providers.openai_compatible.api_key_env is None
    assert config.daemon.idle_timeout == 600.0
    assert config.daemon.log_level == "WARNING"
    assert config.daemon.replay_buffer == 10000
    assert config.conversation.tools == {}


def test_model_name_splits_at_first_slash() -> None:
    config = Config.model_validate({"assistant": {"model": {"id": "openai_compatible/org/m:7b"}}})

    assert config.assistant.model.provider == "openai_compatible"
    assert config.assistant.model.name == "org/m:7b"


def test_config_is_immutable() -> None:
    with pytest.raises(ValidationError):
        Config().daemon.log_level = "DEBUG"  # type: ignore[misc]


# --- layers and precedence -------------------------------------------------------------


def test_user_file_from_jp_config(user_file: Path, env: dict[str, str]) -> None:
    write(user_file, '[assistant.model]\nid = "anthropic/claude"\n')

    assert load_config(env=env).assistant.model.id == "anthropic/claude"


@pytest.mark.skipif(sys.platform != "linux", reason="XDG layout")
def test_default_user_file_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    write(tmp_path / "xdg" / "jp" / "config.toml", "[daemon]\nlog_level = 'debug'\n")

    assert user_config_path({}) == tmp_path / "xdg" / "jp" / "config.toml"
    assert user_config_path({"JP_CONFIG": ""}) == tmp_path / "xdg" / "jp" / "config.toml"
    assert load_config(env={}).daemon.log_level == "DEBUG"


def test_workspace_over_user(user_file: Path, env: dict[str, str], workspace: Path) -> None:
    write(
        user_file,
        '[assistant]\nsystem_prompt = "be brief"\n'
        '[assistant.model]\nid = "anthropic/claude"\n'
        "[assistant.model.parameters]\ntemperature = 0.5\n",
    )
    ws_file(workspace, '[assistant.model]\nid = "openai/gpt"\n')

    config = load_config(workspace=workspace, env=env)

    assert config.assistant.model.id == "openai/gpt"
    # Tables merge key by key: what the workspace did not set stays.
    assert config.assistant.model.parameters.temperature == 0.5
    assert config.assistant.system_prompt == "be brief"


def test_workspace_layer_skipped_without_workspace(env: dict[str, str], workspace: Path) -> None:
    ws_file(workspace, '[assistant.model]\nid = "openai/gpt"\n')

    assert load_config(env=env).assistant.model.id == "local/smollm2"


def test_overrides_over_files_in_order(
    user_file: Path, env: dict[str, str], workspace: Path
) -> None:
    write(user_file, "[daemon]\nidle_timeout = 1.0\nreplay_buffer = 5\n")
    ws_file(workspace, "[daemon]\nidle_timeout = 2.0\nlog_level = 'INFO'\n")

    config = load_config(
        workspace=workspace,
        env=env,
        overrides=[
            ("turn/start config", {"daemon": {"idle_timeout": 3.0, "replay_buffer": 7}}),
            ("-c", parse_assignment("daemon.idle_timeout=4")),
        ],
    )

    assert config.daemon.idle_timeout == 4.0
    assert config.daemon.replay_buffer == 7
    assert config.daemon.log_level == "INFO"


def test_arrays_replace(user_file: Path, env: dict[str, str], workspace: Path) -> None:
    write(user_file, "[conversation.tools.t.options]\nlist = [1, 2, 3]\n")
    ws_file(workspace, "[conversation.tools.t.options]\nlist = [9]\n")

    config = load_config(workspace=workspace, env=env)

    assert config.conversation.tools["t"].options == {"list": [9]}


# --- errors ----------------------------------------------------------------------------


def test_unknown_key_names_key_and_file(user_file: Path, env: dict[str, str]) -> None:
    write(user_file, '[assistant]\nmodle = "x"\n')

    with pytest.raises(ConfigError) as info:
        load_config(env=env)

    assert str(info.value) == f"{user_file}: assistant.modle: unknown key"
    assert info.value.key == "assistant.modle"
    assert info.value.source == str(user_file)
    assert info.value.message == "unknown key"
    assert info.value.errors == [
        {"key": "assistant.modle", "message": "unknown key", "source": str(user_file), "line": "2"}
    ]


def test_every_problem_of_every_layer_at_once_with_lines(
    user_file: Path, env: dict[str, str], tmp_path: Path
) -> None:
    write(user_file, '[assistant]\nmodle = "x"\n\n[daemon]\nidle_timeout = -1\n')
    workspace = tmp_path / "ws"
    (workspace / ".jp").mkdir(parents=True)
    (workspace / ".jp" / "config.toml").write_text('assistant.model.id = "nope"\n')

    with pytest.raises(ConfigError) as info:
        load_config(env=env, workspace=workspace)

    located = [(e["source"], e.get("line"), e["key"]) for e in info.value.errors]
    ws_file = str(workspace / ".jp" / "config.toml")
    assert located == [
        (str(user_file), "2", "assistant.modle"),
        (str(user_file), "5", "daemon.idle_timeout"),
        (ws_file, "1", "assistant.model.id"),
    ]
    assert str(info.value).startswith("config: 3 problems: ")
    assert f"{user_file}:5: daemon.idle_timeout: " in str(info.value)


def test_wrong_type_names_key_and_file(
    env: dict[str, str], workspace: Path, user_file: Path
) -> None:
    write(user_file, '[assistant.model]\nid = "openai/gpt"\n')
    path = ws_file(workspace, '[assistant.model.parameters]\nmax_tokens = "many"\n')

    with pytest.raises(ConfigError) as info:
        load_config(workspace=workspace, env=env)

    assert str(info.value).startswith(
        f"{path}: assistant.model.parameters.max_tokens: Input should be a valid integer"
    )


def test_numeric_strings_are_not_coerced(user_file: Path, env: dict[str, str]) -> None:
    write(user_file, '[assistant.model.parameters]\nmax_tokens = "100"\n')

    with pytest.raises(ConfigError) as info:
        load_config(env=env)

    assert info.value.key == "assistant.model.parameters.max_tokens"


@pytest.mark.parametrize("model_id", ["smollm2", "/smollm2", "local/", ""])
def test_bad_model_id(user_file: Path, env: dict[str, str], model_id: str) -> None:
    write(user_file, f'[assistant.model]\nid = "{model_id}"\n')

    with pytest.raises(ConfigError) as info:
        load_config(env=env)

    assert info.value.key == "assistant.model.id"
    assert info.value.source == str(user_file)
    assert "<provider>/<model>" in info.value.message


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        (
            "[assistant.model.parameters]\ntemperature = 3.0\n",
            "assistant.model.parameters.temperature",
        ),
        ("[assistant.model.parameters]\nmax_tokens = 0\n", "assistant.model.parameters.max_tokens"),
        ("[assistant.reasoning]\neffort = 'extreme'\n", "assistant.reasoning.effort"),
        ("[daemon]\nlog_level = 'loud'\n", "daemon.log_level"),
        ("[daemon]\nidle_timeout = -1\n", "daemon.idle_timeout"),
        ("[providers.local]\nn_ctx = 'big'\n", "providers.local.n_ctx"),
        ("[providers.test]\nscript = 5\n", "providers.test.script"),
        ("[providers]\nbogus = {}\n", "providers.bogus"),
        ("assistant = 3\n", "assistant"),
    ],
)
def test_invalid_values_name_their_key(
    user_file: Path, env: dict[str, str], toml: str, key: str
) -> None:
    write(user_file, toml)

    with pytest.raises(ConfigError) as info:
        load_config(env=env)

    assert info.value.key == key
    assert str(info.value).startswith(f"{user_file}: {key}: ")
    assert "\n" not in str(info.value)


def test_all_errors_of_a_layer_are_kept(user_file: Path, env: dict[str, str]) -> None:
    write(user_file, "[daemon]\nreplay_buffer = 'x'\nbogus = 1\n")

    with pytest.raises(ConfigError) as info:
        load_config(env=env)

    assert {e["key"] for e in info.value.errors} == {"daemon.replay_buffer", "daemon.bogus"}
    assert info.value.key == info.value.errors[0]["key"]


def test_bad_toml_names_file_and_line(
    env: dict[str, str], workspace: Path, user_file: Path
) -> None:
    write(user_file, "[daemon]\n")
    path = ws_file(workspace, "[daemon]\nidle_timeout = = 3\n")

    with pytest.raises(ConfigError) as info:
        load_config(workspace=workspace, env=env)

    line = str(info.value)
    assert line.startswith(f"{path}: invalid TOML: ")
    assert "line 2" in line
    assert info.value.source == str(path)


def test_non_utf8_file(user_file: Path, env: dict[str, str]) -> None:
    user_file.parent.mkdir(parents=True)
    user_file.write_bytes(b"[daemon]\nlog_level = '\xff'\n")

    with pytest.raises(ConfigError, match="not UTF-8") as info:
        load_config(env=env)

    assert info.value.source == str(user_file)


def test_unreadable_config_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read") as info:
        load_config(env={"JP_CONFIG": str(tmp_path)})

    assert info.value.source == str(tmp_path)


def test_override_errors_name_their_source(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(env=env, overrides=[("turn/start config", {"daemon": {"nope": 1}})])
    assert str(info.value) == "turn/start config: daemon.nope: unknown key"

    with pytest.raises(ConfigError) as info:
        load_config(env=env, overrides=[("-c", parse_assignment("daemon.replay_buffer=lots"))])
    assert str(info.value).startswith("-c: daemon.replay_buffer: ")


def test_override_must_be_a_table(env: dict[str, str]) -> None:
    bad: Any = ["not", "a", "table"]
    with pytest.raises(ConfigError) as info:
        load_config(env=env, overrides=[("turn/start config", bad)])

    assert str(info.value) == "turn/start config: expected a table"


# --- relative paths --------------------------------------------------------------------


def test_relative_paths_resolve_against_their_file(
    user_file: Path, env: dict[str, str], workspace: Path
) -> None:
    write(user_file, "[providers.local]\nmodel_path = 'models/m.gguf'\n")
    ws_file(workspace, "[providers.test]\nscript = 'script.json'\nrecord = '/abs/rec.jsonl'\n")

    config = load_config(workspace=workspace, env=env)

    assert config.providers.local.model_path == user_file.parent / "models" / "m.gguf"
    assert config.providers.test.script == workspace / ".jp" / "script.json"
    assert config.providers.test.record == Path("/abs/rec.jsonl")


def test_home_is_expanded(user_file: Path, env: dict[str, str]) -> None:
    write(user_file, "[providers.test]\nscript = '~/s.json'\n")

    assert load_config(env=env).providers.test.script == Path.home() / "s.json"


def test_override_paths_resolve_against_workspace(env: dict[str, str], workspace: Path) -> None:
    override = {"providers": {"test": {"script": "s.json"}}}

    with_ws = load_config(workspace=workspace, env=env, overrides=[("o", override)])
    without = load_config(env=env, overrides=[("o", override)])

    assert with_ws.providers.test.script == workspace / "s.json"
    assert without.providers.test.script == Path("s.json")


# --- parse_assignment --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("assistant.model.id=local/smollm2", {"assistant": {"model": {"id": "local/smollm2"}}}),
        ("daemon.replay_buffer=12", {"daemon": {"replay_buffer": 12}}),
        ("a.b=1.5", {"a": {"b": 1.5}}),
        ("a=true", {"a": True}),
        ("a=false", {"a": False}),
        ("a=[1, 'x']", {"a": [1, "x"]}),
        ("a={ state = false }", {"a": {"state": False}}),
        ('a="quoted string"', {"a": "quoted string"}),
        ("a='1'", {"a": "1"}),
        ("a=hello world", {"a": "hello world"}),
        ("a=b=c", {"a": "b=c"}),
        ("a=", {"a": ""}),
        ("a=[1, 2", {"a": "[1, 2"}),
        ("a=2024-01-01", {"a": "2024-01-01"}),
        ("  a . b  =  1  ", {"a": {"b": 1}}),
        (
            "conversation.tools.*.run=unattended",
            {"conversation": {"tools": {"*": {"run": "unattended"}}}},
        ),
        ("conversation.tools.'*'.run=ask", {"conversation": {"tools": {"*": {"run": "ask"}}}}),
        ('x."b.c".d=1', {"x": {"b.c": {"d": 1}}}),
    ],
)
def test_parse_assignment(text: str, expected: dict[str, Any]) -> None:
    assert parse_assignment(text) == expected


@pytest.mark.parametrize("text", ["noequals", "=1", "a..b=1", "a b=1", "a.''=1", ".a=1", "a.=1"])
def test_parse_assignment_bad_syntax(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_assignment(text)

    assert info.value.source == "-c"
    assert str(info.value).startswith("-c: ")


def test_assignment_newline_is_literal() -> None:
    assert parse_assignment("a=1\nb = 2") == {"a": "1\nb = 2"}


# --- model switch and inquiry assistant ------------------------------------------------------


def test_with_model_keeps_everything_else() -> None:
    base = Config.model_validate(
        {"assistant": {"model": {"parameters": {"max_tokens": 9}}}, "daemon": {"replay_buffer": 3}}
    )

    switched = base.with_model("openai/gpt-4o")

    assert switched.assistant.model.id == "openai/gpt-4o"
    assert switched.assistant.model.parameters.max_tokens == 9
    assert switched.daemon.replay_buffer == 3
    assert base.assistant.model.id == "local/smollm2"


def test_with_model_rejects_bad_id() -> None:
    with pytest.raises(ConfigError) as info:
        Config().with_model("gpt-4o", source="turn/start model")

    assert info.value.key == "assistant.model.id"
    assert str(info.value).startswith("turn/start model: assistant.model.id: ")


def test_inquiry_assistant_merge_order() -> None:
    config = Config.model_validate(
        {
            "assistant": {
                "system_prompt": "main",
                "model": {"id": "anthropic/big", "parameters": {"max_tokens": 100}},
                "reasoning": {"effort": "high"},
            },
            "conversation": {
                "inquiry": {
                    "assistant": {"model": {"id": "anthropic/small"}, "system_prompt": "inq"}
                }
            },
        }
    )
    question = PartialAssistantConfig.model_validate({"reasoning": {"effort": "off"}})

    plain = config.inquiry_assistant()
    targeted = config.inquiry_assistant(question)

    assert plain.model.id == "anthropic/small"
    assert plain.model.parameters.max_tokens == 100
    assert plain.system_prompt == "inq"
    assert plain.reasoning.effort == "high"
    assert targeted.reasoning.effort == "off"
    assert targeted.model.id == "anthropic/small"
