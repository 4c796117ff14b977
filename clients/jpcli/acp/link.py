"""An asyncio JSON-RPC connection to the shared `jpd` on its Unix socket.

The bridge speaks the daemon's protocol (protocol.md: `Content-Length` framing) like
`jp` does, but from an event loop: requests are awaited, notifications go to one
callback in arrival order (so `turn/event`s keep their `seq` order), and each
server-to-client request (`inquiry/prompt`, `tool/permission`) runs as its own task,
because answering it means asking the editor, which may take as long as a person does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shlex
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from jpcli import __version__, paths
from jpcli.daemon import PROTOCOL_VERSION, DaemonError, SocketDaemon
from jpcli.remote import Remote, remote_from_env, ssh_command
from jpcli.rpc import INTERNAL_ERROR, METHOD_NOT_FOUND, REQUEST_CANCELLED, encode_message

log = logging.getLogger(__name__)

RequestHandler = Callable[[Any], Awaitable[Any]]
NotificationHandler = Callable[[str, Any], Awaitable[None]]

_MAX_HEADERS = 65536


class LinkError(Exception):
    """An error response from the daemon (or one to send it): `code`, `message`, `data`."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class LinkClosed(Exception):
    """The daemon connection ended."""


class DaemonLink:
    """One initialized connection to the daemon (see the module docstring)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._next_id = 1
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.handlers: dict[str, RequestHandler] = {}
        """Server-to-client request handlers by method; raise `LinkError` to refuse."""
        self.on_notification: NotificationHandler | None = None
        self.closed = asyncio.Event()
        self.process: asyncio.subprocess.Process | None = None
        """The `ssh ... jp proxy` behind a remote link, reaped on `close`."""
        self._reading = asyncio.create_task(self._read_loop())

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """Send a request and await its result; raises `LinkError` or `LinkClosed`."""
        if self.closed.is_set():
            raise LinkClosed("the connection to jpd is closed")
        request_id = self._next_id
        self._next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        try:
            await self._send(message)
            return await future
        finally:
            self._pending.pop(request_id, None)

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        await self._send(message)

    async def close(self) -> None:
        """Close the connection; the daemon keeps running, and so do its turns."""
        self._writer.close()
        with contextlib.suppress(OSError, ConnectionError):
            await self._writer.wait_closed()
        self._reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reading
        for task in list(self._tasks):
            task.cancel()
        self._finish()
        if self.process is not None:
            await _reap(self.process)

    # --- internals ---------------------------------------------------------------

    async def _send(self, message: dict[str, Any]) -> None:
        try:
            self._writer.write(encode_message(message))
            await self._writer.drain()
        except (OSError, ConnectionError) as exc:
            raise LinkClosed(f"cannot write to jpd: {exc}") from None

    async def _read_loop(self) -> None:
        try:
            while True:
                message = await self._read_message()
                if message is None:
                    break
                await self._route(message)
        except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError) as exc:
            log.warning("connection to jpd ended: %s", exc)
        finally:
            self._finish()

    def _finish(self) -> None:
        self.closed.set()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(LinkClosed("the connection to jpd closed"))

    async def _read_message(self) -> dict[str, Any] | None:
        try:
            header = await self._reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial.strip():
                raise
            return None
        except asyncio.LimitOverrunError:
            raise ValueError("header block too long") from None
        if len(header) > _MAX_HEADERS:
            raise ValueError("header block too long")
        length = None
        for line in header.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        if length is None or length < 0:
            raise ValueError("frame without a valid Content-Length")
        body = await self._reader.readexactly(length)
        message = json.loads(body)
        if not isinstance(message, dict):
            raise ValueError("frame body is not a JSON object")
        return message

    async def _route(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if isinstance(method, str) and "id" in message:
            task = asyncio.create_task(self._answer(message["id"], method, message.get("params")))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        elif isinstance(method, str):
            if self.on_notification is not None:
                try:
                    await self.on_notification(method, message.get("params"))
                except Exception:  # one bad notification must not end the bridge
                    log.exception("handling %s failed", method)
        else:
            future = self._pending.get(message.get("id"))  # type: ignore[arg-type]
            if future is None or future.done():
                return
            error = message.get("error")
            if isinstance(error, dict):
                future.set_exception(
                    LinkError(
                        int(error.get("code", INTERNAL_ERROR)),
                        str(error.get("message", "error")),
                        error.get("data"),
                    )
                )
            else:
                future.set_result(message.get("result"))

    async def _answer(self, request_id: Any, method: str, params: Any) -> None:
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        try:
            handler = self.handlers.get(method)
            if handler is None:
                raise LinkError(METHOD_NOT_FOUND, f"method not supported: {method}")
            reply["result"] = await handler(params)
        except LinkError as exc:
            if exc.code != REQUEST_CANCELLED:
                log.warning("refused %s: %s", method, exc.message)
            reply["error"] = {"code": exc.code, "message": exc.message}
        except asyncio.CancelledError:
            return  # the connection is closing: nobody to answer
        except Exception as exc:
            log.exception("answering %s failed", method)
            reply["error"] = {"code": INTERNAL_ERROR, "message": f"{type(exc).__name__}: {exc}"}
        with contextlib.suppress(LinkClosed):
            await self._send(reply)


async def connect(
    workspace_root: str,
    capabilities: Mapping[str, Any],
    *,
    environ: Mapping[str, str] | None = None,
    configure: Callable[[DaemonLink], None] | None = None,
) -> DaemonLink:
    """Connect to the shared daemon (starting it when none answers, as `jp` does) and
    run `initialize` with this (absolute) workspace root and these capabilities.

    `configure` sets the link's handlers before `initialize`: the daemon may send
    pending questions before it answers. Raises `DaemonError` or `LinkError`.
    """
    remote = remote_from_env(environ)
    if remote is not None:
        return await _connect_remote(remote, workspace_root, capabilities, environ, configure)
    daemon = SocketDaemon(environ=environ)
    for attempt in (1, 2):
        sock = await asyncio.to_thread(daemon.open_socket)
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=2**26)
        link = DaemonLink(reader, writer)
        if configure is not None:
            configure(link)
        try:
            await link.request(
                "initialize",
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "clientInfo": {"name": "jp-acp", "version": __version__},
                    "capabilities": dict(capabilities),
                    "workspaceRoot": workspace_root,
                    "dataDir": paths.data_dir(daemon.env),
                },
            )
            await link.notify("initialized", {})
            return link
        except LinkClosed:
            await link.close()
            # A daemon that was stopping as we connected: let it go, then start anew.
            if attempt == 2 or not await asyncio.to_thread(daemon.wait_stopped, 5.0):
                raise daemon.died() from None
        except LinkError:
            await link.close()
            raise
    raise DaemonError("unreachable")


async def _connect_remote(
    remote: Remote,
    workspace_root: str,
    capabilities: Mapping[str, Any],
    environ: Mapping[str, str] | None,
    configure: Callable[[DaemonLink], None] | None,
) -> DaemonLink:
    """`connect` over `ssh HOST jp proxy` (`jp --remote HOST acp`): the workspace is the
    remote's (`HOST:/path`, else the editor's path taken as one there)."""
    command = ssh_command(remote, environ)
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=2**26,
        )
    except OSError as exc:
        raise DaemonError(f"cannot run {shlex.join(command)}: {exc}") from None
    assert process.stdout is not None and process.stdin is not None
    link = DaemonLink(process.stdout, process.stdin)
    link.process = process
    if configure is not None:
        configure(link)
    try:
        await link.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "clientInfo": {"name": "jp-acp", "version": __version__},
                "capabilities": dict(capabilities),
                "workspaceRoot": remote.path or workspace_root,
            },
        )
        await link.notify("initialized", {})
    except LinkClosed:
        await link.close()
        raise DaemonError(
            f"lost the connection to jpd on {remote.host} (ssh exited with code "
            f"{process.returncode}); try: {shlex.join(command)}"
        ) from None
    except LinkError:
        await link.close()
        raise
    return link


async def _reap(process: asyncio.subprocess.Process) -> None:
    # Its input is closed: the proxy ends this connection and ssh exits.
    try:
        await asyncio.wait_for(process.wait(), 5)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
