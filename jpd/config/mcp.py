"""MCP servers as tool sources: `[mcp.servers.<name>]` (protocol.md section 9.6).

Every field is optional in a layer, so a workspace file can switch off a server the
user file declares (`enable = false`) without repeating it. Whether a server has a
way to run (`command` or `url`, not both) is checked where it is used, on the merged
config.
"""

from typing import Annotated, Literal

from pydantic import Field

from jpd.config.models import ConfigModel

SamplingMode = Literal["ask", "unattended", "skip"]


class McpServerConfig(ConfigModel):
    """One MCP server: a command speaking MCP on stdio, or a streamable HTTP URL."""

    command: Annotated[list[str], Field(min_length=1)] | None = None
    """Program and arguments, run in the workspace root (stdio transport)."""
    env: dict[str, str] = {}
    """Added to the small safe environment the server inherits (the MCP SDK's own
    allow-list, HOME, LOGNAME, PATH, SHELL, TERM, USER: a subset of the tools')."""
    url: str | None = None
    """A streamable HTTP endpoint (`http://127.0.0.1:8765/mcp`)."""
    headers: dict[str, str] = {}
    """HTTP headers sent with every request to `url`."""
    enable: bool = True
    sampling: SamplingMode = "ask"
    """`sampling/createMessage`: ask permission (`ask`), allow, or refuse (`skip`)."""
    startup_timeout: Annotated[float, Field(gt=0)] = 30.0
    """Seconds the server has to start and list its tools."""
    timeout: Annotated[float, Field(gt=0)] | None = None
    """Seconds one call may take, unless the tool's own `timeout` says otherwise."""

    def transport_problem(self) -> str | None:
        """Why this server cannot be started as configured, or None."""
        if self.command is None and self.url is None:
            return "needs `command` (stdio) or `url` (streamable HTTP)"
        if self.command is not None and self.url is not None:
            return "has both `command` and `url`; keep one"
        return None


class McpConfig(ConfigModel):
    servers: dict[str, McpServerConfig] = Field(default_factory=dict)
