"""The effective tools of a turn: built-ins and configured tools, merged config,
per-turn toggles applied, JSON schemas built."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from jpd.config import Config
from jpd.config.tools import ToolConfig
from jpd.llm.base import ToolDefinition
from jpd.protocol.client_requests import ToolToggle
from jpd.protocol.errors import ConfigInvalid, InvalidParams
from jpd.tools.builtin import BuiltinRegistry, BuiltinTool
from jpd.tools.schema import parameters_to_schema


@dataclass(frozen=True)
class EffectiveTool:
    name: str
    source: Literal["builtin", "local"]
    config: ToolConfig
    enabled: bool
    schema: dict[str, Any]
    builtin: BuiltinTool | None

    @property
    def definition(self) -> ToolDefinition:
        """What the model is told about this tool."""
        text = self.config.summary or self.config.description or ""
        return ToolDefinition(name=self.name, description=text, parameters=self.schema)


def build_catalog(
    config: Config, registry: BuiltinRegistry, toggles: Sequence[ToolToggle] = ()
) -> dict[str, EffectiveTool]:
    """Every known tool by name (enabled or not), toggles applied left to right."""
    tools: dict[str, EffectiveTool] = {}
    for name in sorted(set(registry.names()) | set(config.tool_names())):
        builtin = registry.get(name)
        merged = config.tool_config(name, builtin.default_config() if builtin else None)
        source = merged.source or ("builtin" if builtin else "local")
        if source == "builtin" and builtin is None:
            raise ConfigInvalid(
                f"conversation.tools.{name}.source: there is no built-in tool named {name!r}"
            )
        if source == "local" and merged.command is None:
            raise ConfigInvalid(f"conversation.tools.{name}.command: a local tool needs a command")
        tools[name] = EffectiveTool(
            name=name,
            source=source,
            config=merged,
            enabled=merged.enabled,
            schema=parameters_to_schema(merged.parameters),
            builtin=builtin if source == "builtin" else None,
        )
    return apply_toggles(tools, toggles)


def apply_toggles(
    tools: dict[str, EffectiveTool], toggles: Sequence[ToolToggle]
) -> dict[str, EffectiveTool]:
    """RFD 081: a bulk toggle skips tools whose `allow_toggle` refuses it; a named
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
    return {
        name: EffectiveTool(
            name=t.name,
            source=t.source,
            config=t.config,
            enabled=state[name],
            schema=t.schema,
            builtin=t.builtin,
        )
        for name, t in tools.items()
    }
