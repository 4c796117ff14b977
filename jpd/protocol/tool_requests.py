"""Params and results of `tool/list` and `tool/call` (protocol.md 5.14, 5.15;
camelCase on the wire)."""

from typing import Any, Literal

from pydantic import Field

from jpd.protocol.base import WireModel, WireParams
from jpd.protocol.detached import DetachedMode
from jpd.protocol.environment import ClientEnvironment


class ToolListParams(WireParams):
    conversation_id: str | None = None
    environment: ClientEnvironment | None = Field(default=None, repr=False)


class ToolInfo(WireModel):
    name: str
    source: Literal["builtin", "local", "mcp"]
    server: str | None = None
    """For an MCP tool: the server (`mcp.servers.<server>`) it belongs to."""
    mcp_tool: str | None = None
    """For an MCP tool: its name on the server (differs from `name` when renamed)."""
    enabled: bool
    run: Literal["ask", "unattended", "skip"]
    result: Literal["unattended", "ask", "skip"]
    summary: str | None = None
    parameters: dict[str, Any]
    hidden: bool = False
    """`style.hidden`: clients need not show this tool's calls."""


class ToolListResult(WireModel):
    tools: list[ToolInfo]


class ToolCallParams(WireParams):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    conversation_id: str | None = None
    detached: DetachedMode | None = None
    environment: ClientEnvironment | None = Field(default=None, repr=False)
    """The client's working directory and environment for this call only."""


class ToolCallResult(WireModel):
    content: str
    is_error: bool
