"""Tool settings: enable shorthands, `'*'` merging, the detached cascade (`jpd.config`)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, get_args

import pytest

from jpd.config import (
    CommandConfig,
    Config,
    ConfigError,
    DetachedKinds,
    PartialAssistantConfig,
    ToolConfig,
    load_config,
    merge_tool_config,
    parse_assignment,
    resolve_detached_mode,
)
from jpd.config.loader import validate_layer
from jpd.config.tools import DetachedPolicy
from jpd.protocol.detached import DetachedKind, DetachedMode


def tools(tools: dict[str, Any]) -> Config:
    return validate_layer({"conversation": {"tools": tools}}, source="test")


def tool(**fields: Any) -> ToolConfig:
    return ToolConfig.model_validate(fields)


def cascade(
    config: Config, name: str, kind: DetachedKind, builtin: ToolConfig | None = None
) -> DetachedMode:
    """The cascade of protocol.md section 10.2 over the separate layers (no merging)."""
    layers = (config.conversation.tools.get(name), config.conversation.tools.get("*"), builtin)
    return resolve_detached_mode(kind, *(t.detached if t else None for t in layers))


def mode_for(
    config: Config, name: str, kind: DetachedKind, builtin: ToolConfig | None = None
) -> DetachedMode:
    """The mode the daemon uses (from the merged tool config), checked against the cascade."""
    merged = config.tool_config(name, builtin).detached_policy(kind).mode
    assert merged == cascade(config, name, kind, builtin)
    return merged


# --- defaults ------------------------------------------------------------------------


def test_unconfigured_tool_defaults() -> None:
    effective = Config().tool_config("anything")

    assert effective == ToolConfig()
    assert effective.enabled is True
    assert effective.allow_toggle == "any"
    assert effective.run == "ask"
    assert effective.result == "unattended"
    assert effective.timeout is None
    assert effective.detached is None
    assert effective.detached_timeout == 600.0
    assert effective.detached_fallback == "deny"
    assert effective.style.hidden is False


def test_full_tool_table_validates() -> None:
    config = tools(
        {
            "fs_read": {
                "source": "local",
                "command": {"program": "python", "args": ["read.py"], "shell": False},
                "summary": "Read a file",
                "description": "Long text",
                "parameters": {
                    "path": {"type": "string", "required": True, "description": "file"},
                    "mode": {"type": "string", "enum": ["text", "bytes"], "default": "text"},
                    "lines": {"type": "array", "items": {"type": "integer"}},
                    "opts": {"type": "object", "properties": {"x": {"type": "boolean"}}},
                    "flex": {"type": ["boolean", "string"]},
                },
                "enable": "explicit",
                "run": "unattended",
                "result": "ask",
                "timeout": 30,
                "options": {"root": "."},
                "style": {"hidden": True},
                "questions": {
                    "overwrite": {"answer": True},
                    "why": {"target": "assistant", "exclusive": False},
                    "how": {"target": {"model": {"id": "anthropic/small"}}, "prompt_label": "Q"},
                },
                "detached": {"run": "auto", "tool": "defaults"},
                "detached_timeout": 5,
                "detached_fallback": "defaults",
            }
        }
    )

    t = config.tool_config("fs_read")
    assert t.command == CommandConfig(program="python", args=["read.py"])
    assert t.parameters["lines"].items is not None
    assert t.parameters["lines"].items.type == "integer"
    assert t.parameters["flex"].type == ["boolean", "string"]
    assert t.timeout == 30.0
    assert t.questions["overwrite"].answer is True
    assert t.questions["why"].target == "assistant"
    assert isinstance(t.questions["how"].target, PartialAssistantConfig)
    assert t.questions["overwrite"].target == "user"
    assert t.detached == DetachedKinds(run="auto", tool="defaults")
    assert t.detached_fallback == "defaults"


def test_command_may_be_a_string() -> None:
    assert tools({"t": {"command": "echo hi"}}).tool_config("t").command == "echo hi"


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ({"run": "sometimes"}, "conversation.tools.t.run"),
        ({"result": "maybe"}, "conversation.tools.t.result"),
        ({"timeout": 0}, "conversation.tools.t.timeout"),
        ({"source": "remote"}, "conversation.tools.t.source"),
        ({"command": 5}, "conversation.tools.t.command"),
        ({"command": {"args": ["x"]}}, "conversation.tools.t.command.program"),
        ({"command": {"program": "p", "env": {}}}, "conversation.tools.t.command.env"),
        ({"parameters": {"p": {"type": "str"}}}, "conversation.tools.t.parameters.p.type"),
        ({"parameters": {"p": {"required": True}}}, "conversation.tools.t.parameters.p.type"),
        (
            {"parameters": {"p": {"type": "array", "items": {"type": "x"}}}},
            "conversation.tools.t.parameters.p.items.type",
        ),
        ({"style": {"hidden": "yes"}}, "conversation.tools.t.style.hidden"),
        ({"questions": {"q": {"target": "bob"}}}, "conversation.tools.t.questions.q.target"),
        (
            {"questions": {"q": {"target": {"model": {"id": "x"}}}}},
            "conversation.tools.t.questions.q.target.model.id",
        ),
        ({"questions": {"q": {"exclusive": 1}}}, "conversation.tools.t.questions.q.exclusive"),
        ({"detached": "sometimes"}, "conversation.tools.t.detached"),
        ({"detached": {"run": "maybe"}}, "conversation.tools.t.detached.run"),
        ({"detached": {"result": "auto"}}, "conversation.tools.t.detached.result"),
        ({"detached_fallback": "defer"}, "conversation.tools.t.detached_fallback"),
        ({"detached_timeout": -1}, "conversation.tools.t.detached_timeout"),
        ({"enable": "maybe"}, "conversation.tools.t.enable"),
        ({"enable": 1}, "conversation.tools.t.enable"),
        ({"enable": {"allow_toggle": "x"}}, "conversation.tools.t.enable.allow_toggle"),
        ({"colour": "red"}, "conversation.tools.t.colour"),
    ],
)
def test_invalid_tool_settings_name_their_key(value: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        tools({"t": value})

    assert info.value.key == key
    assert str(info.value).startswith(f"test: {key}: ")


def test_tool_error_in_file_names_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[conversation.tools.'*']\nrun = 'often'\n", encoding="utf-8")

    with pytest.raises(ConfigError) as info:
        load_config(env={"JP_CONFIG": str(path)})

    assert str(info.value).startswith(f"{path}: conversation.tools.*.run: Input should be ")


# --- enable (RFD 081) ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "state", "allow_toggle"),
    [
        (True, True, "any"),
        (False, False, "any"),
        ("on", True, "any"),
        ("off", False, "any"),
        ("always", True, "never"),
        ("explicit", False, "if_named"),
        ({"state": False, "allow_toggle": "if_named_or_group"}, False, "if_named_or_group"),
    ],
)
def test_enable_forms(value: Any, state: bool, allow_toggle: str) -> None:
    effective = tools({"t": {"enable": value}}).tool_config("t")

    assert effective.enable.state is state
    assert effective.enable.allow_toggle == allow_toggle
    assert effective.enabled is state
    assert effective.allow_toggle == allow_toggle


def test_partial_enable_table_keeps_builtin_toggle_policy() -> None:
    builtin = tool(enable={"state": True, "allow_toggle": "if_named"})

    partial = tools({"ask_user": {"enable": {"state": False}}}).tool_config("ask_user", builtin)
    shorthand = tools({"ask_user": {"enable": False}}).tool_config("ask_user", builtin)

    assert (partial.enabled, partial.allow_toggle) == (False, "if_named")
    # The shorthand is a whole table: it resets the policy too.
    assert (shorthand.enabled, shorthand.allow_toggle) == (False, "any")


def test_enable_shorthand_from_assignment() -> None:
    config = load_config(
        env={"JP_CONFIG": "/nonexistent/jp.toml"},
        overrides=[("-c", parse_assignment("conversation.tools.t.enable=explicit"))],
    )

    assert config.tool_config("t").enable.allow_toggle == "if_named"


# --- '*' merging -------------------------------------------------------------------------------


def test_tool_inherits_star_field_by_field() -> None:
    config = tools(
        {
            "*": {"run": "unattended", "timeout": 10, "style": {"hidden": True}},
            "t": {"run": "skip"},
        }
    )

    effective = config.tool_config("t")

    assert effective.run == "skip"
    assert effective.timeout == 10.0
    assert effective.style.hidden is True
    assert config.tool_config("other").run == "unattended"


def test_explicit_default_value_still_overrides_star() -> None:
    config = tools({"*": {"run": "unattended"}, "t": {"run": "ask"}})

    assert config.tool_config("t").run == "ask"


def test_nested_tables_merge_key_by_key() -> None:
    config = tools(
        {
            "*": {
                "questions": {"q": {"prompt_label": "Tool", "exclusive": True}, "r": {"answer": 1}},
                "options": {"a": 1, "nested": {"x": 1}},
                "parameters": {"p": {"type": "string", "description": "star"}},
            },
            "t": {
                "questions": {"q": {"exclusive": False}},
                "options": {"b": 2, "nested": {"y": 2}},
                "parameters": {"p": {"type": "string", "required": True}, "q": {"type": "integer"}},
            },
        }
    )

    effective = config.tool_config("t")

    assert effective.questions["q"].prompt_label == "Tool"
    assert effective.questions["q"].exclusive is False
    assert effective.questions["r"].answer == 1
    assert effective.options == {"a": 1, "b": 2, "nested": {"x": 1, "y": 2}}
    assert effective.parameters["p"].description == "star"
    assert effective.parameters["p"].required is True
    assert set(effective.parameters) == {"p", "q"}


def test_command_replaces_whole() -> None:
    config = tools(
        {
            "*": {"command": {"program": "python", "args": ["-u"], "shell": True}},
            "t": {"command": {"program": "node"}},
        }
    )

    assert config.tool_config("t").command == CommandConfig(program="node")


def test_builtin_default_below_star_below_user() -> None:
    builtin = tool(
        run="unattended",
        result="unattended",
        summary="builtin",
        style={"hidden": True},
        questions={"answer": {"prompt_label": "Assistant"}},
    )
    config = tools(
        {
            "*": {"run": "ask", "timeout": 5},
            "ask_user": {"questions": {"answer": {"answer": "yes"}}, "summary": "mine"},
        }
    )

    effective = config.tool_config("ask_user", builtin)

    assert effective.run == "ask"  # '*' over builtin
    assert effective.result == "unattended"  # builtin kept
    assert effective.timeout == 5.0
    assert effective.summary == "mine"
    assert effective.style.hidden is True
    assert effective.questions["answer"].prompt_label == "Assistant"
    assert effective.questions["answer"].answer == "yes"


def test_merge_tool_config_chains() -> None:
    a = tool(run="skip", timeout=1)
    b = tool(timeout=2, summary="b")
    c = tool(summary="c")

    merged = merge_tool_config(merge_tool_config(a, b), c)

    assert (merged.run, merged.timeout, merged.summary) == ("skip", 2.0, "c")
    assert merged.model_fields_set == {"run", "timeout", "summary"}


def test_tool_settings_merge_across_layers(tmp_path: Path) -> None:
    user = tmp_path / "user.toml"
    user.write_text(
        "[conversation.tools.'*']\ntimeout = 7\n"
        "[conversation.tools.t]\nrun = 'skip'\nenable = 'always'\n"
        "[conversation.tools.t.questions.q]\nprompt_label = 'L'\n",
        encoding="utf-8",
    )
    workspace = tmp_path / "ws"
    (workspace / ".jp").mkdir(parents=True)
    (workspace / ".jp" / "config.toml").write_text(
        "[conversation.tools.t]\nresult = 'ask'\nenable = { state = false }\n"
        "[conversation.tools.t.questions.q]\nexclusive = true\n",
        encoding="utf-8",
    )

    config = load_config(workspace=workspace, env={"JP_CONFIG": str(user)})
    effective = config.tool_config("t")

    assert (effective.run, effective.result, effective.timeout) == ("skip", "ask", 7.0)
    assert (effective.enabled, effective.allow_toggle) == (False, "never")
    assert effective.questions["q"].prompt_label == "L"
    assert effective.questions["q"].exclusive is True
    assert config.tool_names() == ["t"]


# --- detached cascade (protocol.md 10.2) -------------------------------------------------


def test_cascade_step1_tool_kind_wins() -> None:
    config = tools({"*": {"detached": {"run": "deny"}}, "t": {"detached": {"run": "auto"}}})

    assert mode_for(config, "t", "run") == "auto"


def test_cascade_step2_tool_scalar_beats_star_kind() -> None:
    config = tools({"*": {"detached": {"run": "deny"}}, "t": {"detached": "defaults"}})

    assert mode_for(config, "t", "run") == "defaults"


def test_cascade_step3_star_kind_when_tool_table_lacks_kind() -> None:
    config = tools(
        {"*": {"detached": {"tool": "auto", "run": "deny"}}, "t": {"detached": {"run": "defaults"}}}
    )

    assert mode_for(config, "t", "tool") == "auto"
    assert mode_for(config, "t", "run") == "defaults"


def test_cascade_step4_star_scalar() -> None:
    config = tools({"*": {"detached": "auto"}, "t": {"detached": {"run": "deny"}}})

    assert mode_for(config, "t", "deliver") == "auto"
    assert mode_for(config, "unconfigured", "run") == "auto"


def test_cascade_step5_builtin_default_is_defer() -> None:
    config = tools({"t": {"run": "ask"}})

    for kind in get_args(DetachedKind):
        assert mode_for(config, "t", kind) == "defer"
        assert mode_for(Config(), "t", kind) == "defer"


def test_cascade_tool_builtin_default_below_star() -> None:
    builtin = tool(detached={"tool": "deny"})

    assert mode_for(Config(), "ask_user", "tool", builtin) == "deny"
    assert mode_for(Config(), "ask_user", "run", builtin) == "defer"
    assert mode_for(tools({"*": {"detached": "auto"}}), "ask_user", "tool", builtin) == "auto"


def test_detached_table_over_scalar_across_layers(tmp_path: Path) -> None:
    user = tmp_path / "user.toml"
    user.write_text("[conversation.tools.t]\ndetached = 'auto'\n", encoding="utf-8")

    config = load_config(
        env={"JP_CONFIG": str(user)},
        overrides=[("-c", parse_assignment("conversation.tools.t.detached.run=deny"))],
    )

    assert mode_for(config, "t", "run") == "deny"
    assert mode_for(config, "t", "deliver") == "auto"


_SETTINGS: list[Any] = [None, "auto", {"run": "deny"}, {"tool": "defaults", "deliver": "deny"}]


@pytest.mark.parametrize(("star", "own"), list(itertools.product(_SETTINGS, _SETTINGS)))
def test_merged_tool_config_agrees_with_cascade(star: Any, own: Any) -> None:
    entries: dict[str, Any] = {}
    if star is not None:
        entries["*"] = {"detached": star}
    if own is not None:
        entries["t"] = {"detached": own}
    config = tools(entries)

    for kind in get_args(DetachedKind):
        assert config.tool_config("t").detached_policy(kind).mode == cascade(config, "t", kind)


def test_request_override_beats_every_layer_and_policy_carries_timeout_and_fallback() -> None:
    config = tools(
        {"*": {"detached_timeout": 5, "detached_fallback": "auto"}, "t": {"detached": "deny"}}
    )

    for kind in get_args(DetachedKind):
        assert config.tool_config("t").detached_policy(kind, "defer") == DetachedPolicy(
            mode="defer", timeout=5.0, fallback="auto"
        )
    assert ToolConfig().detached_policy("run") == DetachedPolicy("defer", 600.0, "deny")


def test_detached_timeout_and_fallback_inherit_from_star() -> None:
    config = tools({"*": {"detached_timeout": 30, "detached_fallback": "auto"}, "t": {}})

    assert config.tool_config("t").detached_timeout == 30.0
    assert config.tool_config("t").detached_fallback == "auto"
    assert config.tool_config("u", tool(detached_fallback="defaults")).detached_fallback == "auto"
