"""The `jp` commands, run against an initialized connection to the daemon."""

from __future__ import annotations

import contextlib
import signal
import threading
from types import FrameType
from typing import Any, TextIO

from clients.jp.render import TurnRenderer, format_conversation_row, format_persisted_event
from clients.jp.rpc import Connection, ConnectionClosed, RpcError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_CANCELLED = 130

NOT_FOUND = -32001
_POLL = 0.1  # seconds between checks for Ctrl-C while waiting for events


class _Interrupts:
    """SIGINT handler for a running query: the first Ctrl-C asks for cancellation,
    the second raises `KeyboardInterrupt` (exit at once)."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None
        self._installed = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __enter__(self) -> _Interrupts:
        # Signal handlers can only be set from the main thread; elsewhere Ctrl-C keeps
        # its default behaviour.
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self)
            self._installed = True
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._installed:
            # None: the previous handler was not installed from Python; use the default.
            previous = signal.default_int_handler if self._previous is None else self._previous
            signal.signal(signal.SIGINT, previous)
            self._installed = False


def _latest_conversation(connection: Connection) -> str | None:
    result = connection.request("conversation/list", {})
    conversations = result.get("conversations") if isinstance(result, dict) else None
    if conversations:
        first = conversations[0]
        conversation_id = first.get("conversationId") if isinstance(first, dict) else None
        if isinstance(conversation_id, str):
            return conversation_id
    return None


def query(
    connection: Connection,
    message: str,
    *,
    new: bool = False,
    model: str | None = None,
    config: dict[str, Any] | None = None,
    out: TextIO,
    err: TextIO,
    out_tty: bool = False,
    err_tty: bool = False,
) -> int:
    """Run one turn and stream it; returns the exit code.

    Continues the most recent conversation unless `new`. Exit codes: 0 for
    `end_turn`/`max_tokens`, 1 for `error` or a refused `turn/start`, 130 when cancelled.
    `RpcError` from other calls and `ConnectionClosed` propagate to the caller.
    """
    renderer = TurnRenderer(out, err, out_tty=out_tty, err_tty=err_tty)
    with _Interrupts() as interrupts:
        conversation_id = None if new else _latest_conversation(connection)
        params: dict[str, Any] = {"message": message}
        if conversation_id is not None:
            params["conversationId"] = conversation_id
        if model is not None:
            params["model"] = model
        if config:
            params["config"] = config
        if interrupts.requested:
            return EXIT_CANCELLED  # Ctrl-C before anything started: nothing to cancel
        try:
            started = connection.request("turn/start", params)
        except RpcError as exc:
            err.write(f"jp: {exc.message}\n")
            return EXIT_ERROR
        turn_id = started.get("turnId") if isinstance(started, dict) else None
        if not isinstance(turn_id, str):
            err.write(f"jp: error: unexpected turn/start result: {started!r}\n")
            return EXIT_ERROR
        try:
            return _stream(connection, turn_id, renderer, interrupts)
        except (ConnectionClosed, KeyboardInterrupt):
            # End the partial answer's line before the caller prints its one-line error.
            with contextlib.suppress(OSError, ValueError):
                renderer.finish()
            raise


def _stream(
    connection: Connection, turn_id: str, renderer: TurnRenderer, interrupts: _Interrupts
) -> int:
    """Render the turn's events until `turn_completed`; cancel it on the first Ctrl-C."""
    cancel_sent = False
    while True:
        if interrupts.requested and not cancel_sent:
            cancel_sent = True
            renderer.note("jp: cancelling (Ctrl-C again to quit now)")
            # An error here (e.g. the turn just ended) is fine: turn_completed is on the way.
            with contextlib.suppress(RpcError):
                connection.request("turn/cancel", {"turnId": turn_id})
        note = connection.receive(timeout=_POLL)
        if note is None or note.method != "turn/event" or not isinstance(note.params, dict):
            continue
        if note.params.get("turnId") != turn_id:
            continue
        event = note.params.get("event")
        if not isinstance(event, dict):
            continue
        if event.get("kind") != "turn_completed":
            renderer.handle(event)
            continue
        renderer.finish()
        return _completed(event, renderer)


def _completed(event: dict[str, Any], renderer: TurnRenderer) -> int:
    reason = event.get("stopReason")
    if reason in ("end_turn", "max_tokens"):
        if reason == "max_tokens":
            renderer.note("jp: note: the answer was cut off (max_tokens)")
        return EXIT_OK
    if reason == "cancelled":
        return EXIT_CANCELLED
    message = " ".join(str(event.get("error") or f"turn ended with {reason}").split())
    renderer.note(f"jp: error: {message}")
    return EXIT_ERROR


def _not_found(exc: RpcError, conversation_id: str, err: TextIO) -> int:
    if exc.code == NOT_FOUND:
        err.write(f"jp: conversation not found: {conversation_id}\n")
    else:
        err.write(f"jp: {exc.message}\n")
    return EXIT_ERROR


def conversation_list(connection: Connection, *, out: TextIO) -> int:
    """`jp conversation ls`: one line per conversation, newest first."""
    result = connection.request("conversation/list", {})
    for conversation in result.get("conversations") or []:
        out.write(format_conversation_row(conversation) + "\n")
    return EXIT_OK


def conversation_show(
    connection: Connection, conversation_id: str, *, out: TextIO, err: TextIO
) -> int:
    """`jp conversation show ID`: every persisted event, readably."""
    try:
        result = connection.request("conversation/get", {"conversationId": conversation_id})
    except RpcError as exc:
        return _not_found(exc, conversation_id, err)
    for event in result.get("events") or []:
        if isinstance(event, dict):
            out.write(format_persisted_event(event) + "\n")
    return EXIT_OK


def conversation_remove(connection: Connection, conversation_id: str, *, err: TextIO) -> int:
    """`jp conversation rm ID`: delete a conversation."""
    try:
        connection.request("conversation/delete", {"conversationId": conversation_id})
    except RpcError as exc:
        return _not_found(exc, conversation_id, err)
    return EXIT_OK
