"""The effective tools of a turn: built-ins, configured tools and the tools of MCP
servers, merged config, per-turn toggles applied, JSON schemas built."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from jpd.config import Config
from jpd.config.tools import ToolConfig
from jpd.inquiry.answer_tool import ANSWER_INQUIRY_TOOL
from jpd.llm.base import ToolDefinition
from jpd.protocol.errors import ConfigInvalid, InvalidParams
from jpd.protocol.turn_requests import ToolToggle
from jpd.tools.builtin import BuiltinRegistry, BuiltinTool
from jpd.tools.schema import parameters_to_schema

if TYPE_CHECKING:
    # Loaded with the first MCP server: a turn without one never needs them.
    from jpd.mcp.model import McpToolInfo, McpToolRef, ServerListing


@dataclass(frozen=True)
class EffectiveTool:
    name: str
    source: Literal["builtin", "local", "mcp"]
    config: ToolConfig
    enabled: bool
    schema: dict[str, Any]
    builtin: BuiltinTool | None
    mcp: McpToolRef | None = None

    @functools.cached_property
    def definition(self) -> ToolDefinition:
        """What the model is told about this tool: one object for the tool's life (a
        catalog lives as long as its config), so that its serialised form is reused
        (`request_build.encoded_once`)."""
        text = self.config.summary or self.config.description or ""
        return ToolDefinition(name=self.name, description=text, parameters=self.schema)


def offered_definitions(tools: Mapping[str, EffectiveTool]) -> tuple[ToolDefinition, ...]:
    """Enabled tools in name order, then `answer_inquiry` whenever any tool is on.

    The list is stable within a turn, so request prefixes stay cacheable, and the
    inquiry side request can reuse it unchanged (protocol.md 10.4).
    """
    enabled = tuple(t.definition for _, t in sorted(tools.items()) if t.enabled)
    return (*enabled, ANSWER_INQUIRY_TOOL) if enabled else ()


def is_hidden(tools: Mapping[str, EffectiveTool], name: str) -> bool:
    """`style.hidden` of the named tool (unknown tools are shown)."""
    tool = tools.get(name)
    return tool is not None and tool.config.style.hidden


def build_catalog(
    config: Config,
    registry: BuiltinRegistry,
    toggles: Sequence[ToolToggle] = (),
    servers: Mapping[str, ServerListing] | None = None,
) -> dict[str, EffectiveTool]:
    """Every known tool by name (enabled or not), toggles applied left to right.

    `servers` are the listings of the enabled MCP servers (protocol.md section 9.6):
    each of their tools is offered under its own name unless a configured tool names
    it with `source = "mcp.<server>.<tool>"`. Two tools with one name are an error.
    """
    check_servers(config)
    offered = _mcp_tools(servers or {})
    renamed = {
        source
        for name, cfg in config.conversation.tools.items()
        if (source := cfg.source) is not None and source.startswith("mcp.")
    }
    tools: dict[str, EffectiveTool] = {}
    # With MCP servers on, settings without a command may be for a tool a server does
    # not list (yet, or while it is down): they wait for it instead of failing the turn.
    unlisted = bool(servers)
    for name in sorted(set(registry.names()) | set(config.tool_names())):
        tool = _configured(config, registry, name, offered, unlisted)
        if tool is not None:
            tools[name] = tool
    for source, (server, info) in sorted(offered.items()):
        if source in renamed:
            continue
        other = tools.get(info.name)
        if other is not None:
            if other.mcp is not None and f"mcp.{other.mcp.server}.{other.mcp.tool}" == source:
                continue
            raise ConfigInvalid(
                f"two tools are named {info.name!r}: {_describe(other)} and {source}; "
                f'rename one with conversation.tools.<name>.source = "{source}"'
            )
        tools[info.name] = _mcp_tool(config, info.name, server, info, config.tool_config(info.name))
    return apply_toggles(tools, toggles)


def check_servers(config: Config) -> None:
    """Every enabled MCP server has one way to run (`command` or `url`)."""
    for name, server in config.mcp.servers.items():
        problem = server.transport_problem()
        if server.enable and problem is not None:
            raise ConfigInvalid(f"mcp.servers.{name}: {problem}")


def _mcp_tools(servers: Mapping[str, ServerListing]) -> dict[str, tuple[str, McpToolInfo]]:
    return {
        f"mcp.{server}.{info.name}": (server, info)
        for server, listing in servers.items()
        for info in listing.tools
    }


def _describe(tool: EffectiveTool) -> str:
    if tool.mcp is not None:
        return f"mcp.{tool.mcp.server}.{tool.mcp.tool}"
    return f"the {tool.source} tool {tool.name!r}"


def _configured(
    config: Config,
    registry: BuiltinRegistry,
    name: str,
    offered: Mapping[str, tuple[str, McpToolInfo]],
    unlisted: bool,
) -> EffectiveTool | None:
    builtin = registry.get(name)
    merged = config.tool_config(name, builtin.default_config() if builtin else None)
    source = merged.source
    if source is None and builtin is None and merged.command is None:
        # No command: the settings of an MCP tool of this name, if a server has one.
        matches = [s for s, (_, info) in offered.items() if info.name == name]
        if len(matches) > 1:
            raise ConfigInvalid(
                f"two tools are named {name!r}: {' and '.join(sorted(matches))}; "
                f'rename one with conversation.tools.<name>.source = "{matches[0]}"'
            )
        if matches:
            source = matches[0]
    source = source or ("builtin" if builtin else "local")
    if source.startswith("mcp."):
        _, server, tool = source.split(".", 2)
        server_config = config.mcp.servers.get(server)
        if server_config is None:
            raise ConfigInvalid(
                f"conversation.tools.{name}.source: there is no MCP server named {server!r} "
                f"(configure it under [mcp.servers.{server}])"
            )
        from jpd.mcp.model import McpToolInfo

        found = offered.get(source)
        info = found[1] if found else McpToolInfo(tool, "", {"type": "object"})
        if builtin is not None:
            raise ConfigInvalid(
                f"two tools are named {name!r}: the builtin tool {name!r} and {source}; "
                "rename the MCP tool"
            )
        return _mcp_tool(config, name, server, info, merged, enabled=server_config.enable)
    if source == "builtin" and builtin is None:
        raise ConfigInvalid(
            f"conversation.tools.{name}.source: there is no built-in tool named {name!r}"
        )
    if source == "local" and merged.command is None:
        if unlisted:
            return None
        raise ConfigInvalid(f"conversation.tools.{name}.command: a local tool needs a command")
    return EffectiveTool(
        name=name,
        source="builtin" if source == "builtin" else "local",
        config=merged,
        enabled=merged.enabled,
        schema=parameters_to_schema(merged.parameters),
        builtin=builtin if source == "builtin" else None,
    )


def _mcp_tool(
    config: Config,
    name: str,
    server: str,
    info: McpToolInfo,
    merged: ToolConfig,
    *,
    enabled: bool = True,
) -> EffectiveTool:
    from jpd.mcp.model import McpToolRef

    if merged.summary is None and merged.description is None and info.description:
        merged = merged.model_copy(update={"description": info.description})
    return EffectiveTool(
        name=name,
        source="mcp",
        config=merged,
        enabled=enabled and merged.enabled,
        schema=info.input_schema,
        builtin=None,
        mcp=McpToolRef(server=server, tool=info.name, config=config.mcp.servers[server]),
    )


def apply_toggles(
    tools: dict[str, EffectiveTool], toggles: Sequence[ToolToggle]
) -> dict[str, EffectiveTool]:
    """protocol.md 9.1: a bulk toggle skips tools whose `allow_toggle` refuses it; a named
    toggle that the tool refuses is an error."""
    state = {name: tool.enabled for name, tool in tools.items()}
    for toggle in toggles:
        if toggle.name is None:
            for name, tool in tools.items():
                if tool.config.allow_toggle == "any":
                    state[name] = toggle.enable
            continue
        named = tools.get(toggle.name)
        if named is None:
            known = ", ".join(sorted(tools)) or "none"
            raise InvalidParams(f"unknown tool {toggle.name!r} in tools; known tools: {known}")
        if named.config.allow_toggle == "never":
            verb = "enabled" if toggle.enable else "disabled"
            raise InvalidParams(
                f'tool {toggle.name!r} cannot be {verb} per turn (allow_toggle = "never")'
            )
        state[toggle.name] = toggle.enable
    return {name: replace(t, enabled=state[name]) for name, t in tools.items()}
