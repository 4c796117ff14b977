"""`jp` as the daemon's prompt backend: answers `inquiry/prompt` and `tool/permission`
on the terminal, for the conversation it follows.

Handlers run on the thread that calls `Connection.receive` (the main thread), so a
prompt blocks the event stream while the person answers; events that arrive meanwhile
are shown afterwards. `inquiry/resolved` is watched on the reader thread: a question
answered elsewhere (another client, `jp inquiry answer`) while it is on screen is
dismissed with a note. Standard library only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from jpcli.prompts import ANSWER_TYPES, BadPrompt, PromptIO, Prompts
from jpcli.rpc import INVALID_PARAMS, REQUEST_CANCELLED, Connection, RpcError
from jpcli.tty import PromptCancelled, PromptDismissed, open_terminal

CAPABILITIES: dict[str, Any] = {"prompt": {"answerTypes": list(ANSWER_TYPES)}, "permission": True}
"""What `jp` declares in `initialize` when a person can be asked on a terminal."""

# A JSON-RPC error other than -32800 tells the daemon "not this client" (the question
# stays open for others) rather than "the person declined".
NOT_MINE = -32603

OpenIO = Callable[[Callable[[], str | None]], AbstractContextManager[PromptIO]]

_CALLS_KEPT = 256
"""`tool_call` events remembered for permission prompts (the newest)."""

_OUTCOMES = {
    "answered": "answered elsewhere",
    "cancelled": "cancelled elsewhere",
    "timed_out": "no longer waiting for an answer (timed out)",
}


def permission_key(params: Any) -> str | None:
    """The id the daemon gives a permission request in `inquiry/list` and
    `inquiry/resolved` (`<tool call id>.permission.<kind>`)."""
    if not isinstance(params, dict):
        return None
    if isinstance(params.get("inquiryId"), str):
        return str(params["inquiryId"])
    call_id, kind = params.get("toolCallId"), params.get("kind")
    return f"{call_id}.permission.{kind}" if isinstance(call_id, str) else None


def _inquiry_key(params: Any) -> str | None:
    value = params.get("inquiryId") if isinstance(params, dict) else None
    return value if isinstance(value, str) else None


class TerminalPrompter:
    """Asks the daemon's questions on the terminal, once `install`ed on a connection.

    `conversation_id` limits prompts to the followed conversation (questions of other
    conversations are left to other clients); `before_prompt` is called before
    anything is shown (the follower stops its spinner and ends open lines there).
    """

    def __init__(self, *, color: bool = True, open_io: OpenIO = open_terminal) -> None:
        self.color = color
        self.open_io = open_io
        self.conversation_id: str | None = None
        self.before_prompt: Callable[[], None] = lambda: None
        self._lock = threading.Lock()
        # Per (conversation, id): requests seen arriving, requests taken up by a
        # handler (in the same order), and the last resolution with the number of
        # requests it covers. Ids may repeat (a later turn may reuse tool call ids), so
        # a resolution covers only the requests that had arrived before it.
        self._arrivals: dict[tuple[str, str], int] = {}
        self._taken: dict[tuple[str, str], int] = {}
        self._resolved: dict[tuple[str, str], tuple[int, str]] = {}
        # The calls seen starting (`tool_call` events), for the permission prompt.
        self._calls: dict[tuple[str, str], dict[str, Any]] = {}

    def install(self, connection: Connection) -> None:
        """Register the handlers (before `initialize`, so no request finds none)."""
        connection.on_request("inquiry/prompt", self._on_inquiry)
        connection.on_request("tool/permission", self._on_permission)
        connection.on_message("inquiry/prompt", self._arrived(_inquiry_key))
        connection.on_message("tool/permission", self._arrived(permission_key))
        connection.on_message("inquiry/resolved", self._on_resolved)
        connection.on_message("turn/event", self._on_event)

    # --- reader thread ---------------------------------------------------------------

    def _arrived(self, key_of: Callable[[Any], str | None]) -> Callable[[Any], None]:
        def watcher(params: Any) -> None:
            key = key_of(params)
            conversation = params.get("conversationId") if isinstance(params, dict) else None
            if key is not None and isinstance(conversation, str):
                with self._lock:
                    slot = (conversation, key)
                    self._arrivals[slot] = self._arrivals.get(slot, 0) + 1

        return watcher

    def _on_event(self, params: Any) -> None:
        event = params.get("event") if isinstance(params, dict) else None
        if not isinstance(event, dict) or event.get("kind") != "tool_call":
            return
        key = (str(params.get("conversationId")), str(event.get("id")))
        with self._lock:
            self._calls[key] = event
            while len(self._calls) > _CALLS_KEPT:
                del self._calls[next(iter(self._calls))]

    def _on_resolved(self, params: Any) -> None:
        if not isinstance(params, dict):
            return
        key, conversation = params.get("inquiryId"), params.get("conversationId")
        if isinstance(key, str) and isinstance(conversation, str):
            note = _OUTCOMES.get(str(params.get("outcome")), "resolved elsewhere")
            with self._lock:
                slot = (conversation, key)
                self._resolved[slot] = (self._arrivals.get(slot, 0), note)

    # --- handlers (receiving thread) -------------------------------------------------

    def _on_inquiry(self, params: Any) -> Any:
        return self._ask(params, _inquiry_key(params), lambda p: p.inquiry(params))

    def _on_permission(self, params: Any) -> Any:
        call = None
        if isinstance(params, dict):
            with self._lock:
                key = (str(params.get("conversationId")), str(params.get("toolCallId")))
                call = self._calls.get(key)
        return self._ask(params, permission_key(params), lambda p: p.permission(params, call))

    def _ask(self, params: Any, key: str | None, ask: Callable[[Prompts], Any]) -> Any:
        conversation = params.get("conversationId") if isinstance(params, dict) else None
        if key is None or not isinstance(conversation, str):
            raise RpcError(INVALID_PARAMS, "jp: request without an id or conversationId")
        if self.conversation_id is not None and conversation != self.conversation_id:
            raise RpcError(
                NOT_MINE, f"jp answers questions of {self.conversation_id} only, not {conversation}"
            )

        slot = (conversation, key)
        with self._lock:
            ordinal = self._taken[slot] = self._taken.get(slot, 0) + 1

        def dismissed() -> str | None:
            with self._lock:
                covered, note = self._resolved.get(slot, (0, ""))
            return note if ordinal <= covered else None

        if dismissed():
            raise RpcError(REQUEST_CANCELLED, "already resolved elsewhere")
        self.before_prompt()
        try:
            with self.open_io(dismissed) as io:
                try:
                    return ask(Prompts(io, color=self.color))
                except PromptDismissed as exc:
                    io.write(f"\njp: {exc}\n")
                    raise RpcError(REQUEST_CANCELLED, str(exc)) from None
                except PromptCancelled:
                    io.write("\njp: question dismissed\n")
                    raise
        except PromptCancelled as exc:
            raise RpcError(REQUEST_CANCELLED, f"cancelled by the user ({exc})") from None
        except BadPrompt as exc:
            raise RpcError(INVALID_PARAMS, f"jp: {exc}") from None


def capabilities(enabled: bool) -> dict[str, Any]:
    """The `initialize` capabilities: prompting ones when `enabled`, else none."""
    return dict(CAPABILITIES) if enabled else {}
