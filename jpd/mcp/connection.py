"""One running MCP server: its transport, its SDK `ClientSession`, its tools.

The session lives in a task of the daemon's task group (the SDK's context managers
must be entered and left in one task), so it outlives the turn that started it. A
server that fails to start, dies or stops answering is marked dead; the manager
starts a new one for the next call. A stdio server's stderr goes to a temporary
file whose tail names the problem in errors.

MCP has no field linking a server's request (elicitation, sampling) to the call it
serves, and over stdio no transport does either: such a request is attributed to
the oldest call in flight on this server (protocol.md section 9.6).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import IO, Any

import anyio
from mcp import types
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from jpd import __version__
from jpd.allowed_env import base_environment
from jpd.config.mcp import McpServerConfig
from jpd.mcp import elicit
from jpd.mcp.content import render_result
from jpd.mcp.model import CallHooks, McpResult, McpToolInfo, SamplingError, SamplingRequest

log = logging.getLogger(__name__)

PING_AFTER_IDLE = 2.0
"""Seconds without traffic after which a server is pinged before a call."""

PING_TIMEOUT = 5.0

STDERR_TAIL = 2000
"""Characters of a server's stderr quoted in an error."""

CLIENT_INFO = types.Implementation(name="jpd", version=__version__)


def _flatten(exc: BaseException) -> BaseException:
    """The first leaf of nested exception groups (task groups wrap transport errors)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException) -> str:
    """A one-line account of a failure for the model and the user."""
    leaf = _flatten(exc)
    if isinstance(leaf, MCPError):
        return leaf.error.message
    if isinstance(leaf, TimeoutError):
        return "timed out"
    if isinstance(leaf, FileNotFoundError):
        return f"command not found: {leaf.filename or leaf}"
    text = str(leaf) or type(leaf).__name__
    return text.splitlines()[0] if text else type(leaf).__name__


def _text(content: Any) -> str:
    """The text of a sampling message's content (a block or a list of blocks)."""
    blocks = content if isinstance(content, list) else [content]
    return "\n".join(getattr(block, "text", f"[{getattr(block, 'type', '?')}]") for block in blocks)


class ServerConnection:
    """A started (or failed) MCP server; `serve` runs for the connection's life."""

    def __init__(self, name: str, config: McpServerConfig, root: Path) -> None:
        self.name = name
        self.config = config
        self.root = root
        self.tools: tuple[McpToolInfo, ...] = ()
        self.error: str | None = None
        self.ready = anyio.Event()
        self.stale = False
        """The server announced `tools/list_changed`: list again before the next turn."""
        self._stop = anyio.Event()
        self._gone = anyio.Event()
        self._session: ClientSession | None = None
        self._stderr: IO[str] | None = None
        self._last_tail = ""
        self._calls: list[CallHooks] = []
        self._last_used = 0.0

    @property
    def alive(self) -> bool:
        """Started and not known to be dead."""
        return self.ready.is_set() and self._session is not None and not self._stop.is_set()

    # --- life ----------------------------------------------------------------------

    async def serve(self) -> None:
        """Start the server, keep its session open until `stop`; never raises."""
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(await self._transport(stack))
                session = await stack.enter_async_context(
                    ClientSession(
                        read,
                        write,
                        elicitation_callback=self._on_elicit,
                        sampling_callback=self._on_sample,
                        message_handler=self._on_message,
                        client_info=CLIENT_INFO,
                    )
                )
                with anyio.fail_after(self.config.startup_timeout):
                    await session.initialize()
                    self.tools = await self._list_tools(session)
                self._session = session
                self._last_used = anyio.current_time()
                self.ready.set()
                await self._stop.wait()
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:  # any failure ends this connection, not the daemon
            leaf = _flatten(exc)
            if isinstance(leaf, TimeoutError) and not self.ready.is_set():
                reason = f"did not start within {self.config.startup_timeout:g}s"
            else:
                reason = describe(exc)
            self.error = self.error or await self.failure(reason)
            log.warning("MCP server %r: %s", self.name, self.error)
        finally:
            self._session = None
            self._stop.set()
            self.ready.set()
            self._gone.set()
            if self._stderr is not None:
                # Kept for the calls that report this end after the file is gone (a
                # few KiB of a local temporary file: a negligible read).
                self._last_tail = _tail(self._stderr)
                with contextlib.suppress(OSError):
                    self._stderr.close()

    async def _transport(self, stack: AsyncExitStack) -> Any:
        if self.config.url is not None:
            # The SDK's own helper (MCP timeouts, origin-bound redirects); it is not
            # re-exported, hence the private module. A client we pass is ours to close.
            client = await stack.enter_async_context(
                create_mcp_http_client(headers=dict(self.config.headers))
            )
            return streamable_http_client(self.config.url, http_client=client)
        assert self.config.command is not None
        program, *args = self.config.command
        # Closed by `serve` when the connection ends.
        self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        # The same allow-list as every tool (jpd.allowed_env), not the daemon's whole
        # environment; the SDK adds its own smaller allow-list under it.
        env = {**base_environment(os.environ), **self.config.env}
        params = StdioServerParameters(command=program, args=args, env=env, cwd=self.root)
        return stdio_client(params, errlog=self._stderr)

    async def responsive(self) -> bool:
        """Whether the server still answers (pinged when idle: a server may have died or
        hung between calls, and a call is then better made on a fresh one)."""
        session = self._session
        if session is None or self._stop.is_set():
            return False
        if self._calls or anyio.current_time() - self._last_used < PING_AFTER_IDLE:
            return True
        try:
            with anyio.fail_after(PING_TIMEOUT):
                await session.send_ping()
        except Exception as exc:
            log.warning("MCP server %r does not answer a ping (%s); restarting it", self.name, exc)
            self._stop.set()
            return False
        self._last_used = anyio.current_time()
        return True

    async def stop(self) -> None:
        """End the session (and the server process) and wait until it is gone."""
        self._stop.set()
        await self._gone.wait()

    async def _list_tools(self, session: ClientSession) -> tuple[McpToolInfo, ...]:
        tools: list[McpToolInfo] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools.extend(
                McpToolInfo(
                    name=t.name,
                    description=t.description or t.title or "",
                    input_schema=dict(t.input_schema),
                )
                for t in page.tools
            )
            cursor = page.next_cursor
            if not cursor:
                return tuple(tools)

    async def refresh(self) -> None:
        """List the tools again after `tools/list_changed`."""
        session = self._session
        if session is None:
            return
        self.stale = False
        try:
            with anyio.fail_after(self.config.startup_timeout):
                self.tools = await self._list_tools(session)
        except Exception as exc:
            log.warning("MCP server %r: listing its tools again failed: %s", self.name, exc)

    # --- errors --------------------------------------------------------------------

    async def stderr_tail(self) -> str:
        """The end of what a stdio server wrote on stderr ('' for HTTP)."""
        handle = self._stderr
        if handle is None or handle.closed:
            return self._last_tail
        return await anyio.to_thread.run_sync(_tail, handle)

    async def failure(self, reason: str) -> str:
        """`MCP server '<name>' <reason>`, with its stderr tail when it has one."""
        tail = await self.stderr_tail()
        text = f"MCP server {self.name!r}: {reason}"
        return f"{text}\nIts stderr ends with:\n{tail}" if tail else text

    # --- calls ---------------------------------------------------------------------

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        hooks: CallHooks,
        timeout: float | None,  # noqa: ASYNC109 (the tool's setting)
    ) -> McpResult:
        """Call `tool`; failures are error results. Cancelling the caller (or the
        timeout) makes the SDK send `notifications/cancelled`."""
        session = self._session
        if session is None or self._stop.is_set():
            return McpResult(self.error or await self.failure("is not running"), True)
        self._calls.append(hooks)
        self._last_used = anyio.current_time()

        async def report(progress: float, total: float | None, message: str | None) -> None:
            hooks.progress(progress, total, message)

        try:
            with anyio.move_on_after(timeout) as scope:
                result = await session.call_tool(tool, arguments, progress_callback=report)
            if scope.cancelled_caught:
                return McpResult(
                    f"MCP tool {tool!r} of server {self.name!r} timed out after {timeout:g}s", True
                )
        except MCPError as exc:
            if exc.error.code == types.CONNECTION_CLOSED:
                # Read the stderr tail first: stopping closes the file it is in.
                self.error = await self.failure(f"closed the connection during {tool!r}")
                self._stop.set()
                return McpResult(self.error, True)
            return McpResult(
                f"MCP server {self.name!r}: {tool!r} failed: {exc.error.message}", True
            )
        except (ValidationError, RuntimeError, ValueError) as exc:
            return McpResult(
                f"MCP server {self.name!r} answered {tool!r} with an invalid result: "
                f"{describe(exc)}",
                True,
            )
        finally:
            self._calls.remove(hooks)
            self._last_used = anyio.current_time()
        return render_result(result)

    # --- the server's requests and notifications -----------------------------------

    def _current(self) -> CallHooks | None:
        return self._calls[0] if self._calls else None

    async def _on_elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        hooks = self._current()
        if hooks is None:
            return types.ErrorData(
                code=types.INVALID_REQUEST, message="no tool call of this server is running"
            )
        return await elicit.answer(params, hooks)

    async def _on_sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        hooks = self._current()
        if hooks is None:
            return types.ErrorData(
                code=types.INVALID_REQUEST, message="no tool call of this server is running"
            )
        if self.config.sampling == "skip":
            return types.ErrorData(
                code=types.INVALID_REQUEST, message="sampling is refused by configuration"
            )
        messages = tuple((m.role, _text(m.content)) for m in params.messages)
        request = SamplingRequest(
            messages=messages,
            system=params.system_prompt,
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            server=self.name,
            ask_permission=self.config.sampling == "ask",
        )
        try:
            text = await hooks.sample(request)
        except SamplingError as exc:
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"sampling failed: {exc}")
        if text is None:
            return types.ErrorData(
                code=types.INVALID_REQUEST, message="the user refused the sampling request"
            )
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text=text), model="jpd-inquiry"
        )

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.stale = True
        elif isinstance(message, Exception):
            log.warning("MCP server %r sent something unreadable: %s", self.name, message)


def _tail(handle: IO[str]) -> str:
    """The last `STDERR_TAIL` characters written to a server's stderr file ('' if unreadable)."""
    with contextlib.suppress(OSError, ValueError):
        handle.flush()
        size = handle.seek(0, 2)
        handle.seek(max(size - STDERR_TAIL * 4, 0))
        return handle.read()[-STDERR_TAIL:].strip()
    return ""
