"""Following a turn: render its `turn/event`s until `turn_completed`, handle Ctrl-C.

Used by `jp query` (a turn it just started) and `jp attach` (replayed events first,
then live ones). Events are deduplicated by `seq` (a replay may repeat some).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from types import FrameType
from typing import Any, Protocol, TextIO

from jpcli.rpc import Connection, Notification, RpcError
from jpcli.terminal import Spinner, choose

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CANCELLED = 130

_POLL = 0.1  # seconds between checks for Ctrl-C (and spinner frames) while waiting
QUIT_WAIT = 5.0  # seconds a quitting `jp` waits for its cancelled turn to be recorded
_QUESTION_POLL = 1.0  # seconds between looks for waiting questions while idle


class Renderer(Protocol):
    """What the follower needs of a renderer (plain, markdown)."""

    def handle(self, event: dict[str, Any]) -> None: ...
    def note(self, line: str) -> None: ...
    def finish(self) -> None: ...
    def suspend(self) -> None: ...
    def summary(self) -> None: ...


class JsonLines:
    """`-F json`: each `turn/event` params object as one JSON line on `out`."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err

    def handle_params(self, params: dict[str, Any]) -> None:
        self.out.write(json.dumps(params, ensure_ascii=False, separators=(",", ":")) + "\n")
        self.out.flush()

    def note(self, line: str) -> None:
        self.err.write(line + "\n")
        self.err.flush()

    def finish(self) -> None:
        self.out.flush()


class Interrupts:
    """SIGINT handler while following: the first Ctrl-C is a request the follower acts
    on; another one while it is pending raises `KeyboardInterrupt` (quit at once)."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None
        self._installed = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __enter__(self) -> Interrupts:
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


@dataclass
class Follow:
    """How to follow: the turn to show (and wait for, when `live`), and whether to show
    events of other turns too (`jp attach --from-seq`)."""

    conversation_id: str
    turn_id: str | None
    all_turns: bool = False
    live: bool = True
    """Wait for the turn's live events after the backlog (it is running)."""
    can_prompt: bool = False
    """Ctrl-C asks cancel/detach/resume on the terminal; otherwise it cancels."""
    watch_questions: bool = False
    """Nobody here answers questions: say once when one waits, and how to answer it."""


class Follower:
    """Renders events of one conversation until the followed turn completes."""

    def __init__(
        self,
        connection: Connection,
        follow: Follow,
        *,
        renderer: Renderer | None = None,
        json_lines: JsonLines | None = None,
        spinner: Spinner,
        interrupts: Interrupts,
    ) -> None:
        self.connection = connection
        self.follow = follow
        self.renderer = renderer
        self.json_lines = json_lines
        self.spinner = spinner
        self.interrupts = interrupts
        self._last_seq = 0
        self._waiting = "thinking"  # spinner label; "" while text streams
        self._cancel_sent = False
        self._questions_seen: set[str] = set()
        self._questions_checked = time.monotonic()
        self._saw_start = False
        """The followed turn's `turn_started` was shown: its tool calls were all seen."""
        self._ran_tools = False
        """A tool call of the followed turn was seen (or events may have been missed)."""

    def run(self, backlog: Iterable[Notification] = ()) -> int:
        """Show `backlog`, then live events, until the turn completes; the exit code.

        Quitting (Ctrl-C at the cancel/detach/resume choice) cancels the turn and waits up
        to `QUIT_WAIT` seconds for its end to be recorded; another Ctrl-C leaves at once
        (the cancel is sent either way).
        """
        try:
            return self._run(backlog)
        except KeyboardInterrupt:
            if self.follow.turn_id is None or not self.follow.live:
                raise
            return self._quit()

    def _run(self, backlog: Iterable[Notification]) -> int:
        for queued in backlog:
            code = self._take(queued)
            if code is not None:
                return code
        if self.follow.turn_id is None or not self.follow.live:
            self._finish()
            return EXIT_OK
        while True:
            if self.interrupts.requested and not self._cancel_sent:
                code = self._interrupted()
                if code is not None:
                    return code
            note = self.connection.receive(timeout=_POLL)
            if note is None:
                if self._waiting:
                    self.spinner.tick(self._waiting)
                self._look_for_questions()
                continue
            code = self._take(note)
            if code is not None:
                return code

    def pause(self) -> None:
        """Before a prompt: stop the spinner and end open lines (the turn goes on)."""
        self.spinner.clear()
        paused = getattr(self.renderer, "paused", None)
        if paused is not None:
            paused()
        with contextlib.suppress(OSError, ValueError):
            self._finish()

    def abort(self) -> None:
        """Leave the terminal tidy before the caller reports an error."""
        self.spinner.clear()
        with contextlib.suppress(OSError, ValueError):
            self._finish()

    # --- internals ---------------------------------------------------------------

    def _take(self, note: Notification) -> int | None:
        params = note.params
        if note.method == "turn/lagged" and isinstance(params, dict):
            self._reattach(params)
            return None
        if note.method != "turn/event" or not isinstance(params, dict):
            return None
        if params.get("conversationId") != self.follow.conversation_id:
            return None
        seq = params.get("seq")
        if isinstance(seq, int):
            if seq <= self._last_seq:
                return None  # already shown (a replay overlapping what we saw)
            self._last_seq = seq
        mine = params.get("turnId") == self.follow.turn_id
        if not mine and not self.follow.all_turns:
            return None
        event = params.get("event")
        if not isinstance(event, dict):
            return None
        self.spinner.clear()
        kind = event.get("kind")
        if self.json_lines is not None:
            self.json_lines.handle_params(params)
        elif self.renderer is not None and (kind != "turn_completed" or mine):
            self.renderer.handle(event)
        if kind in ("text_delta", "reasoning_delta"):
            self._waiting = ""
        elif kind in ("tool_call", "tool_result"):
            self._waiting = "running tools"
        if mine and kind == "turn_started":
            self._saw_start = True
        elif mine and kind in ("tool_call", "tool_result"):
            self._ran_tools = True
        if kind == "turn_completed" and mine:
            self._finish()
            if self.renderer is not None and self.json_lines is None:
                self.renderer.summary()
                self._changed_files()
            return self._completed(event)
        return None

    def _reattach(self, params: dict[str, Any]) -> None:
        """We fell behind and were unsubscribed (protocol.md 7.3): attach again from
        where the daemon says; what was already shown is skipped by its seq."""
        if params.get("conversationId") != self.follow.conversation_id:
            return
        self._ran_tools = True  # what was missed may have held tool calls
        from_seq = params.get("fromSeq")
        attach: dict[str, Any] = {"conversationId": self.follow.conversation_id}
        if isinstance(from_seq, int):
            attach["fromSeq"] = from_seq
        self.connection.request("turn/attach", attach)

    def _look_for_questions(self) -> None:
        """No silent waits: one line per question that waits for an answer nobody here
        can give, saying how to answer it."""
        if not self.follow.watch_questions:
            return
        now = time.monotonic()
        if now - self._questions_checked < _QUESTION_POLL:
            return
        self._questions_checked = now
        try:
            result = self.connection.request("inquiry/list", {})
        except RpcError:
            return
        for inquiry in (result.get("inquiries") if isinstance(result, dict) else None) or []:
            if not isinstance(inquiry, dict) or inquiry.get("turnId") != self.follow.turn_id:
                continue
            inquiry_id = str(inquiry.get("inquiryId"))
            if inquiry_id in self._questions_seen:
                continue
            self._questions_seen.add(inquiry_id)
            from jpcli.inquiries import describe

            what = describe(inquiry)
            value = "(it asks, hidden)" if what.endswith("[secret]") else "VALUE"
            self.spinner.clear()
            self._note(
                f"jp: a question waits: {what}; answer it with: "
                f"jp inquiry answer {inquiry_id} {value} (or on a terminal: "
                f"jp attach {self.follow.conversation_id})"
            )

    def _quit(self) -> int:
        self.spinner.clear()
        with contextlib.suppress(OSError, ValueError):
            self._finish()
        if self._cancel_sent:  # the daemon is cancelling it already; the user insists
            return EXIT_CANCELLED
        self._note(
            f"jp: cancelling the turn; waiting up to {QUIT_WAIT:g}s for it to stop "
            "(Ctrl-C again to leave now)"
        )
        if not self._cancel_sent:
            self._cancel_sent = True
            with contextlib.suppress(RpcError):
                self.connection.request("turn/cancel", {"turnId": self.follow.turn_id})
        deadline = time.monotonic() + QUIT_WAIT
        while (left := deadline - time.monotonic()) > 0:
            note = self.connection.receive(timeout=min(left, _POLL))
            if note is None:
                continue
            code = self._take(note)
            if code is not None:
                return code
        self._note(
            "jp: the turn did not stop in time; it may still be running: jp turn ls, "
            f"jp turn cancel {self.follow.conversation_id}"
        )
        return EXIT_CANCELLED

    def _interrupted(self) -> int | None:
        """The first Ctrl-C: cancel, detach or resume (asked on a terminal)."""
        self.spinner.clear()
        choice = "cancel"
        if self.follow.can_prompt:
            if self.renderer is not None:
                # Stop live output without printing the partial answer: resuming redraws
                # it where it was, cancelling prints it once.
                self.renderer.suspend()
            choice = choose(
                "jp: [c]ancel the turn, [d]etach and leave it running, or [r]esume? ",
                {"c": "cancel", "d": "detach", "r": "resume"},
                "resume",
            )
        if choice == "resume":
            self.interrupts.requested = False
            return None
        if choice == "detach":
            with contextlib.suppress(RpcError):
                self.connection.request(
                    "turn/detach", {"conversationId": self.follow.conversation_id}
                )
            self._finish()
            self._note(
                "jp: detached; the turn keeps running. Re-attach with: "
                f"jp attach {self.follow.conversation_id}"
            )
            return EXIT_OK
        self._cancel_sent = True
        self._note("jp: cancelling (Ctrl-C again to quit now)")
        # An error here (e.g. the turn just ended) is fine: turn_completed is on the way.
        with contextlib.suppress(RpcError):
            self.connection.request("turn/cancel", {"turnId": self.follow.turn_id})
        return None

    def _completed(self, event: dict[str, Any]) -> int:
        reason = event.get("stopReason")
        if reason in ("end_turn", "max_tokens"):
            if reason == "max_tokens":
                self._note("jp: note: the answer was cut off (max_tokens)")
            return EXIT_OK
        if reason == "cancelled":
            return EXIT_CANCELLED
        message = " ".join(str(event.get("error") or f"turn ended with {reason}").split())
        self._note(f"jp: error: {message}")
        return EXIT_ERROR

    def _changed_files(self) -> None:
        """After the turn: the files it changed, in one line (nothing when none)."""
        if self.follow.turn_id is None or not self.follow.live:
            return  # a turn shown from its backlog only: not "the end of a turn"
        if self._saw_start and not self._ran_tools:
            # Only tools change files (each change is a tool call's): seen from its
            # start without one, the turn changed none. Saves a request at every end
            # (and the import below, difflib's, between the turn's end and `jp`'s).
            return
        from jpcli.turns.changes import changed_line, turn_changes

        try:
            result = turn_changes(self.connection, self.follow.conversation_id, self.follow.turn_id)
        except (RpcError, OSError):
            return  # an older daemon, or the turn is gone: the list is a courtesy
        line = changed_line(result, os.getcwd())
        if line is not None:
            self._note(line)

    def _note(self, line: str) -> None:
        if self.json_lines is not None:
            self.json_lines.note(line)
        elif self.renderer is not None:
            self.renderer.note(line)

    def _finish(self) -> None:
        if self.json_lines is not None:
            self.json_lines.finish()
        elif self.renderer is not None:
            self.renderer.finish()
