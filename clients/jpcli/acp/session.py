"""One ACP session: one daemon conversation, seen through its own daemon connection.

The session id is the conversation id. Each session has its own connection to the
daemon, initialized with the session's `cwd` as `workspaceRoot` (the workspace for
config layering and the tools' working directory) and subscribed to that one
conversation, so everything that connection receives belongs to the session: events
(also of turns started elsewhere, e.g. by `jp query` in a terminal), questions and
permission requests. Closing it (the editor went away) leaves the turn running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from acp import update_agent_message_text, update_tool_call
from acp.schema import PermissionOption, RequestPermissionResponse, ToolCallUpdate

from jpcli.acp.asking import ask_permission, ask_question, permission_call
from jpcli.acp.config_options import Choices
from jpcli.acp.link import DaemonLink, LinkClosed, LinkError
from jpcli.acp.live_output import LiveOutput
from jpcli.acp.updates import LiveTranslator, tool_note
from jpcli.rpc import METHOD_NOT_FOUND

log = logging.getLogger(__name__)

WATCH_INTERVAL = 0.5
"""Seconds between looks at the daemon's pending questions while a tool runs."""


class Editor(Protocol):
    """The ACP connection to the editor, as a session uses it."""

    async def session_update(self, session_id: str, update: Any) -> None: ...

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> RequestPermissionResponse: ...

    async def create_elicitation(self, message: str, mode: Any) -> Any: ...


def new_session_id() -> str:
    """A new conversation id in the daemon's format (protocol.md 1), made by the bridge
    so that the session id is the conversation id from `session/new` on."""
    return f"c-{datetime.now(UTC):%Y%m%dT%H%M%S}-{secrets.token_hex(4)}"


@dataclass
class Ended:
    """How a turn ended: its `turn_completed` event."""

    stop_reason: str
    error: str | None = None


@dataclass
class Session:
    """State of one session; see the module docstring."""

    session_id: str
    cwd: str
    editor: Editor
    forms: bool
    """The editor declared form elicitation."""
    answer_types: frozenset[str]
    exists: bool
    """The conversation exists in the daemon (a new session's is created by its first
    prompt, with `turn/start` `create`)."""
    terminal_output: bool = False
    """The editor declared `_meta.terminal_output` (live command output as a terminal)."""
    config: dict[str, Any] = field(default_factory=dict)
    extra_roots: list[str] = field(default_factory=list)
    """The editor's `additionalDirectories`: sent as `environment.additionalRoots`."""
    """`turn/start` config of every prompt (the editor's MCP servers)."""
    link: DaemonLink | None = None
    always: dict[tuple[str, str], bool] = field(default_factory=dict)
    """The "always" answers to permission requests: (kind, scope) -> allow."""
    choices: Choices = field(default_factory=Choices)
    """Model, reasoning effort and permission mode of the next prompt."""
    translator: LiveTranslator = field(default_factory=LiveTranslator)
    live_turn: str | None = None
    """The turn running in this conversation, whoever started it."""
    prompt: asyncio.Future[Ended] | None = None
    prompt_turn: str | None = None
    cancel_requested: bool = False
    ended: dict[str, Ended] = field(default_factory=dict)
    held: list[dict[str, Any]] | None = None
    """While `session/load` replays: events received, forwarded once history is sent."""
    noted: set[str] = field(default_factory=set)
    asking: dict[str, tuple[asyncio.Task[Any], str | None]] = field(default_factory=dict)
    """Questions and permission requests open at the editor: the task asking, the call."""
    title: str | None = None
    """The title last sent to the editor (`session_info_update` only when it changes)."""
    _watch: asyncio.Task[None] | None = None

    def configure(self, link: DaemonLink) -> None:
        """Install this session's handlers on its daemon connection (before `initialize`)."""
        link.handlers["tool/permission"] = self._on_permission
        link.handlers["inquiry/prompt"] = self._on_question
        link.on_notification = self._on_notification

    @property
    def daemon(self) -> DaemonLink:
        """The session's daemon connection."""
        assert self.link is not None, "session used before it was connected"
        return self.link

    async def daemon_request(self, method: str, params: dict[str, Any]) -> Any:
        """A request to the daemon on this session's connection."""
        return await self.daemon.request(method, params)

    async def send(self, updates: list[Any]) -> None:
        """Send updates to the editor, in order."""
        for update in updates:
            await self.editor.session_update(self.session_id, update)

    async def close(self) -> None:
        """Stop watching and close the daemon connection; turns keep running."""
        if self._watch is not None:
            self._watch.cancel()
        if self.link is not None:
            await self.link.close()
        if self.prompt is not None and not self.prompt.done():
            self.prompt.set_exception(LinkClosed("the session was closed"))

    # --- events ---------------------------------------------------------------------

    async def _on_notification(self, method: str, params: Any) -> None:
        if not isinstance(params, dict) or params.get("conversationId") != self.session_id:
            return
        if method == "inquiry/resolved":
            asking = self.asking.pop(str(params.get("inquiryId")), None)
            if asking is not None and not asking[0].done():
                # Answered elsewhere (a terminal): the editor's answer would be ignored.
                asking[0].cancel()
                if asking[1] is not None:
                    await self.send([tool_note(asking[1], "Answered elsewhere.")])
            return
        if method != "turn/event":
            return
        if self.held is not None:
            self.held.append(params)
        else:
            await self.forward(params)

    async def forward(self, params: dict[str, Any]) -> None:
        """Show one `turn/event` in the editor and track the turn's state."""
        event, turn_id = params.get("event") or {}, str(params.get("turnId"))
        kind = event.get("kind")
        if kind == "turn_started":
            self.live_turn = turn_id
            # The cost in `usage_update` is the session's: it carries over turns.
            self.translator = LiveTranslator(
                output=LiveOutput(terminal=self.terminal_output),
                cost=self.translator.cost,
                ids=self.translator.ids,
            )
            self.noted.clear()
            if self._watch is None or self._watch.done():
                self._watch = asyncio.create_task(self._watch_questions())
        await self.send(self.translator.translate(event))
        if kind == "turn_completed":
            ended = Ended(str(event.get("stopReason")), event.get("error"))
            self.ended[turn_id] = ended
            if self.live_turn == turn_id:
                self.live_turn = None
            self.settle(turn_id)

    def settle(self, turn_id: str) -> None:
        """Answer the waiting `session/prompt` if `turn_id` is its turn and has ended."""
        ended = self.ended.get(turn_id)
        if ended is None or self.prompt is None or self.prompt_turn != turn_id:
            return
        if not self.prompt.done():
            self.prompt.set_result(ended)

    # --- questions and permissions ---------------------------------------------------

    def _mine(self, params: Any) -> dict[str, Any]:
        # On `initialize` the daemon offers the pending questions of every conversation:
        # this connection answers only its own (any other error: "cannot answer").
        if not isinstance(params, dict) or params.get("conversationId") != self.session_id:
            raise LinkError(METHOD_NOT_FOUND, "not this editor session's conversation")
        return params

    async def _on_permission(self, params: Any) -> Any:
        request = self._mine(params)
        shown = self.translator.ids.of(str(request.get("toolCallId")))
        view = self.translator.views.get(shown)
        if view is None:
            # A call never announced (e.g. `tool/call`): its own entry, finished below.
            shown = str(request.get("inquiryId"))
        call = permission_call(request, shown, view)
        answer = await self._tracked(
            str(request.get("inquiryId")),
            shown,
            ask_permission(self.editor, self.session_id, request, self.always, call),
        )
        allowed = answer.get("allow") is True
        if view is None:
            await self.send([update_tool_call(shown, status="completed" if allowed else "failed")])
        elif allowed and request.get("kind") != "deliver":
            await self.send([update_tool_call(shown, status="in_progress")])
        return answer

    async def _on_question(self, params: Any) -> Any:
        request = self._mine(params)
        call_id = self._call_of(request)
        view = self.translator.views.get(call_id) if call_id is not None else None
        asking = ask_question(
            self.editor,
            self.session_id,
            call_id,
            request,
            forms=self.forms,
            call_title=view.title if view is not None else None,
        )
        kind = ((request.get("question") or {}).get("answerType") or {}).get("type")
        if call_id is not None or self.forms or kind not in ("boolean", "select"):
            return await self._tracked(str(request.get("inquiryId")), call_id, asking)
        # Asked as a permission request of its own (no forms): finish its entry.
        entry = str(request.get("inquiryId"))
        try:
            answer = await self._tracked(entry, None, asking)
        except BaseException:
            with contextlib.suppress(Exception):
                await self.send([update_tool_call(entry, status="failed")])
            raise
        await self.send([update_tool_call(entry, status="completed")])
        return answer

    async def _tracked(self, inquiry_id: str, call_id: str | None, asking: Any) -> Any:
        task = asyncio.ensure_future(asking)
        self.asking[inquiry_id] = (task, call_id)
        try:
            return await task
        finally:
            self.asking.pop(inquiry_id, None)

    def _call_of(self, request: dict[str, Any]) -> str | None:
        """The shown tool call that asks: the running call of the asking tool (the one
        whose id starts the inquiry id, when several calls of it run)."""
        name = request.get("toolName")
        calls = [cid for cid, tool in self.translator.running.items() if tool == name]
        if len(calls) > 1:
            inquiry = str(request.get("inquiryId"))
            ids = self.translator.ids
            calls = [c for c in calls if inquiry.startswith(ids.daemon_of(c) + ".")] or calls[:1]
        return calls[0] if calls else None

    async def _watch_questions(self) -> None:
        """While this conversation's turn runs tools, look for questions the editor is
        never asked (secrets; text without forms) and tell the person where to answer."""
        with contextlib.suppress(LinkClosed, asyncio.CancelledError):
            while self.live_turn is not None:
                await asyncio.sleep(WATCH_INTERVAL)
                if not self.translator.running:
                    continue
                try:
                    pending = await self.daemon.request("inquiry/list")
                except LinkError:
                    continue
                for item in pending.get("inquiries", []):
                    await self._note_unasked(item)

    async def _note_unasked(self, item: dict[str, Any]) -> None:
        prompt = item.get("prompt") or {}
        inquiry_id = str(item.get("inquiryId"))
        if item.get("conversationId") != self.session_id or inquiry_id in self.noted:
            return
        kind = ((prompt.get("question") or {}).get("answerType") or {}).get("type")
        if item.get("kind") != "inquiry" or kind in self.answer_types:
            return
        self.noted.add(inquiry_id)
        secret = kind == "secret"
        what = "a secret, which is never asked in the editor" if secret else kind
        # A secret is typed hidden at the terminal, never given on the command line.
        answer = f"`jp inquiry answer {inquiry_id}`" + ("" if secret else " VALUE")
        text = (
            f"{prompt.get('toolName', 'A tool')} asks ({what}): "
            f"{(prompt.get('question') or {}).get('text', '')}\n"
            f"It waits for an answer from a terminal: `jp attach {self.session_id}`, or "
            f"{answer}."
        )
        call_id = self._call_of(prompt)
        if call_id is not None:
            await self.send([tool_note(call_id, text)])
        else:
            await self.send([update_agent_message_text(f"\n\n{text}\n\n")])
