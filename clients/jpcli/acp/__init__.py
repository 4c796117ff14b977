"""`jp acp`: an Agent Client Protocol agent that bridges an editor to the shared `jpd`.

Editors (Zed, JetBrains IDEs, Neovim plugins) start `jp acp` and speak ACP to it on
stdio; the bridge speaks the daemon's protocol on its Unix socket, starting the daemon
when none answers, like `jp`. Only this package imports the `acp` SDK, and only `jp acp`
imports this package, so plain `jp` starts with the standard library alone.

Modules: `agent` (the ACP methods), `session` (one session = one conversation and its
daemon connection), `updates` (daemon events -> `session/update`), `asking`
(permissions and questions -> editor requests), `link` (the daemon connection),
`lines` (ACP's line framing with JSON-RPC errors for bad lines, and the routes the
SDK lacks), `config_options` (model, effort and mode pickers), `commands` (slash
commands), `session_info` (models, commands and title sent to the editor), `plans`
(`update_plan` calls -> `plan` updates), `inputs` (prompt blocks and MCP servers).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import cast

STDIO_LIMIT = 50 * 1024 * 1024
"""Bytes of one ACP line (editors embed whole files in prompts)."""


def main() -> int:
    """Serve one editor on stdin/stdout until it closes them; returns the exit code."""
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="jp acp: %(levelname)s: %(message)s"
    )
    try:
        asyncio.run(_serve())
    except KeyboardInterrupt:
        return 130
    return 0


async def _serve() -> None:
    from acp import Agent, run_agent
    from acp.stdio import stdio_streams

    from jpcli.acp.agent import JpAgent
    from jpcli.acp.lines import LineTransport

    reader, writer = await stdio_streams(limit=STDIO_LIMIT)
    agent = JpAgent()
    try:
        # The SDK routes only the methods an agent defines (others answer -32601), so
        # the bridge implements a subset of its `Agent` protocol.
        await run_agent(
            cast("Agent", agent), LineTransport(reader, writer), use_unstable_protocol=True
        )
    finally:
        # The editor went away: close the daemon connections; the turns keep running.
        await agent.aclose()
