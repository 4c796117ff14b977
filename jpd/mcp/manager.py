"""The daemon's MCP servers: started lazily, kept for the daemon's life, restarted
after they die (protocol.md section 9.6).

A server is identified by its name, its settings and, for stdio, the workspace it runs
in: a workspace (or a turn's config overrides) that configures it differently gets a
server of its own. The SDK is imported on the first start only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from jpd.config.mcp import McpServerConfig
from jpd.mcp.model import CallHooks, McpResult, McpToolRef, ServerListing

if TYPE_CHECKING:
    from jpd.mcp.connection import ServerConnection

log = logging.getLogger(__name__)

RETRY_AFTER = 30.0
"""Seconds a server that failed to start is not started again for a tool listing
(a call always tries again)."""

_Key = tuple[str, str, str]


class McpManager:
    """Owns every MCP server connection of the daemon."""

    def __init__(self, task_group: TaskGroup) -> None:
        self._tg = task_group
        self._connections: dict[_Key, ServerConnection] = {}
        self._failed_at: dict[_Key, float] = {}
        self._locks: dict[_Key, anyio.Lock] = {}

    @staticmethod
    def _key(name: str, config: McpServerConfig, root: Path) -> _Key:
        where = "" if config.url is not None else str(root)
        return (name, config.model_dump_json(), where)

    async def _connection(
        self, name: str, config: McpServerConfig, root: Path, *, retry_failed: bool
    ) -> ServerConnection:
        key = self._key(name, config, root)
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            current = self._connections.get(key)
            if current is not None and current.alive:
                if current.stale:
                    await current.refresh()
                return current
            failed = self._failed_at.get(key)
            recent = failed is not None and time.monotonic() - failed < RETRY_AFTER
            if current is not None and not retry_failed and recent:
                return current
            if current is not None:
                await current.stop()
            from jpd.mcp.connection import ServerConnection

            connection = ServerConnection(name, config, root)
            self._connections[key] = connection
            self._tg.start_soon(connection.serve, name=f"mcp server {name}")
            await connection.ready.wait()
            if connection.error is not None:
                self._failed_at[key] = time.monotonic()
            else:
                self._failed_at.pop(key, None)
            return connection

    async def listings(
        self, servers: Mapping[str, McpServerConfig], root: Path
    ) -> dict[str, ServerListing]:
        """The tools of every enabled, well-formed server (started concurrently)."""
        found: dict[str, ServerListing] = {}

        async def one(name: str, config: McpServerConfig) -> None:
            connection = await self._connection(name, config, root, retry_failed=False)
            if connection.error is not None and not connection.tools:
                found[name] = ServerListing(name, error=connection.error)
            else:
                found[name] = ServerListing(name, tools=connection.tools, error=connection.error)

        async with anyio.create_task_group() as tg:
            for name, config in servers.items():
                if config.enable and config.transport_problem() is None:
                    tg.start_soon(one, name, config)
        return found

    async def call(
        self,
        ref: McpToolRef,
        arguments: dict[str, Any],
        hooks: CallHooks,
        timeout: float | None,  # noqa: ASYNC109 (a per-tool setting passed through)
        root: Path,
    ) -> McpResult:
        """Call one tool, starting (or restarting) its server if needed."""
        connection = await self._connection(ref.server, ref.config, root, retry_failed=True)
        if connection.alive and not await connection.responsive():
            connection = await self._connection(ref.server, ref.config, root, retry_failed=True)
        if not connection.alive:
            return McpResult(connection.error or f"MCP server {ref.server!r} is not running", True)
        limit = timeout if timeout is not None else ref.config.timeout
        return await connection.call(ref.tool, arguments, hooks, limit)

    def bound(self, root: Path) -> BoundCaller:
        """This manager as the `McpCaller` of one workspace."""
        return BoundCaller(self, root)

    async def aclose(self) -> None:
        """Stop every server."""
        connections = list(self._connections.values())
        self._connections.clear()
        with anyio.CancelScope(shield=True):
            # Together: each stdio server is given a grace period to exit.
            async with anyio.create_task_group() as tg:
                for connection in connections:
                    tg.start_soon(connection.stop)


class BoundCaller:
    """`McpCaller` for tools running in one workspace root."""

    def __init__(self, manager: McpManager, root: Path) -> None:
        self._manager = manager
        self._root = root

    async def call(
        self,
        ref: McpToolRef,
        arguments: dict[str, Any],
        hooks: CallHooks,
        timeout: float | None,  # noqa: ASYNC109
    ) -> McpResult:
        """Call `ref` with the workspace root of this caller."""
        return await self._manager.call(ref, arguments, hooks, timeout, self._root)
