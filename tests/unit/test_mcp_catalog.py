"""MCP config and the tool catalog: naming, renaming, conflicts, disabled servers."""

from __future__ import annotations

from typing import Any

import pytest

from jpd.config import validate_layer
from jpd.config.config import Config
from jpd.config.errors import ConfigError
from jpd.config.merge import merge_models
from jpd.mcp.model import McpToolInfo, ServerListing
from jpd.protocol.errors import ConfigInvalid
from jpd.protocol.turn_requests import ToolToggle
from jpd.tools.builtin import default_registry
from jpd.tools.catalog import build_catalog

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def config(data: dict[str, Any]) -> Config:
    return merge_models(Config(), validate_layer(data, source="test"))


def listing(server: str, *names: str) -> ServerListing:
    return ServerListing(server, tools=tuple(McpToolInfo(n, f"{n} tool", SCHEMA) for n in names))


SERVERS = {"mcp": {"servers": {"fx": {"command": ["fx"]}, "gx": {"url": "http://x/mcp"}}}}


def test_server_tools_are_offered_under_their_own_names() -> None:
    tools = build_catalog(config(SERVERS), default_registry(), (), {"fx": listing("fx", "add")})
    add = tools["add"]
    assert add.source == "mcp"
    assert add.mcp is not None and (add.mcp.server, add.mcp.tool) == ("fx", "add")
    assert add.schema == SCHEMA
    assert add.definition.description == "add tool"
    assert add.config.run == "ask"  # governed like a local tool


def test_config_by_name_applies_to_the_server_tool() -> None:
    data = {**SERVERS, "conversation": {"tools": {"add": {"run": "unattended", "summary": "Sum."}}}}
    tools = build_catalog(config(data), default_registry(), (), {"fx": listing("fx", "add")})
    assert tools["add"].config.run == "unattended"
    assert tools["add"].definition.description == "Sum."


def test_source_renames_a_tool() -> None:
    data = {**SERVERS, "conversation": {"tools": {"plus": {"source": "mcp.fx.add"}}}}
    tools = build_catalog(config(data), default_registry(), (), {"fx": listing("fx", "add")})
    assert "add" not in tools
    assert tools["plus"].mcp is not None and tools["plus"].mcp.tool == "add"


def test_two_servers_with_one_tool_name_is_an_error_naming_both() -> None:
    listings = {"fx": listing("fx", "add"), "gx": listing("gx", "add")}
    with pytest.raises(ConfigInvalid, match=r"mcp\.fx\.add and mcp\.gx\.add"):
        build_catalog(config(SERVERS), default_registry(), (), listings)


def test_renaming_one_resolves_the_conflict() -> None:
    data = {**SERVERS, "conversation": {"tools": {"gadd": {"source": "mcp.gx.add"}}}}
    listings = {"fx": listing("fx", "add"), "gx": listing("gx", "add")}
    tools = build_catalog(config(data), default_registry(), (), listings)
    assert tools["add"].mcp is not None and tools["add"].mcp.server == "fx"
    assert tools["gadd"].mcp is not None and tools["gadd"].mcp.server == "gx"


def test_a_local_tool_and_a_server_tool_with_one_name_conflict() -> None:
    data = {**SERVERS, "conversation": {"tools": {"add": {"command": "add.sh"}}}}
    with pytest.raises(ConfigInvalid, match=r"the local tool 'add' and mcp\.fx\.add"):
        build_catalog(config(data), default_registry(), (), {"fx": listing("fx", "add")})


def test_a_builtin_name_conflicts_too() -> None:
    with pytest.raises(ConfigInvalid, match=r"builtin tool 'ask_user' and mcp\.fx\.ask_user"):
        build_catalog(config(SERVERS), default_registry(), (), {"fx": listing("fx", "ask_user")})


def test_source_naming_an_unknown_server_is_an_error() -> None:
    data = {"conversation": {"tools": {"x": {"source": "mcp.nope.x"}}}}
    with pytest.raises(ConfigInvalid, match="no MCP server named 'nope'"):
        build_catalog(config(data), default_registry(), (), {})


def test_a_server_without_command_or_url_is_an_error() -> None:
    with pytest.raises(ConfigInvalid, match=r"mcp\.servers\.e: needs `command`"):
        build_catalog(config({"mcp": {"servers": {"e": {"env": {}}}}}), default_registry())


def test_server_that_is_down_keeps_configured_tools_callable() -> None:
    data = {
        **SERVERS,
        "conversation": {"tools": {"note": {"source": "mcp.fx.note"}, "other": {"run": "skip"}}},
    }
    listings = {"fx": ServerListing("fx", error="MCP server 'fx': exited")}
    tools = build_catalog(config(data), default_registry(), (), listings)
    assert tools["note"].mcp is not None and tools["note"].enabled
    assert "other" not in tools  # perhaps a tool of the server that is down


def test_disabled_server_tools_are_off_and_toggles_apply() -> None:
    data = {
        "mcp": {"servers": {"fx": {"command": ["fx"], "enable": False}}},
        "conversation": {"tools": {"n": {"source": "mcp.fx.n"}}},
    }
    tools = build_catalog(config(data), default_registry(), (), {})
    assert tools["n"].enabled is False
    on = build_catalog(
        config(SERVERS), default_registry(), [ToolToggle(enable=False)], {"fx": listing("fx", "a")}
    )
    assert on["a"].enabled is False


def test_layers_merge_server_tables_key_by_key() -> None:
    user = validate_layer(
        {"mcp": {"servers": {"fx": {"command": ["fx"], "env": {"A": "1"}}}}}, source="u"
    )
    workspace = validate_layer({"mcp": {"servers": {"fx": {"enable": False}}}}, source="w")
    merged = merge_models(merge_models(Config(), user), workspace)
    server = merged.mcp.servers["fx"]
    assert (server.command, server.env, server.enable) == (["fx"], {"A": "1"}, False)


def test_bad_source_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="source"):
        validate_layer({"conversation": {"tools": {"x": {"source": "mcp.only"}}}}, source="t")


def test_settings_for_a_tool_no_server_lists_wait_for_it() -> None:
    data = {**SERVERS, "conversation": {"tools": {"late": {"run": "unattended"}}}}
    tools = build_catalog(config(data), default_registry(), (), {"fx": listing("fx", "add")})
    assert "late" not in tools
    later = build_catalog(config(data), default_registry(), (), {"fx": listing("fx", "late")})
    assert later["late"].config.run == "unattended"
    without_servers = {"conversation": {"tools": {"late": {"run": "unattended"}}}}
    with pytest.raises(ConfigInvalid, match="a local tool needs a command"):
        build_catalog(config(without_servers), default_registry(), (), {})


def test_describe_tools_names_the_server() -> None:
    from jpd.tools.coordinator import _docs

    tools = build_catalog(config(SERVERS), default_registry(), (), {"fx": listing("fx", "add")})
    _, description = _docs(tools["add"])
    assert description == "add tool\n\n(MCP server: fx)"
