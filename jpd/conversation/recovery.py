"""Closing a turn that a stopped daemon left open (protocol.md section 12.4).

A daemon killed mid-turn leaves a log whose last turn has no `turn_end`. Recovery
appends what makes that turn whole again, never rewriting a line: a cancellation
(`daemon_stopped`) for each question left unanswered, the output that was streaming
(from its checkpoints) as an interrupted `chat_response`, an interrupted error response
for each tool call left without one, and `turn_end` with `stop_reason: "interrupted"`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from jpd.conversation import events as ev
from jpd.conversation.paths import EVENTS_FILE, is_valid_id
from jpd.conversation.store import ConversationNotFound, ConversationStore
from jpd.conversation.turn_lock import TurnLock, last_turn_is_open, reverse_lines, try_lock

log = logging.getLogger(__name__)

INTERRUPTED_TOOL = "Tool call was interrupted: the daemon stopped."
INTERRUPTED_TURN = "the daemon stopped during this turn"


def open_turn(events: Sequence[ev.Event]) -> str | None:
    """The id of the log's last turn when it has no `turn_end` after its start (or its
    latest `turn_resume`), else None."""
    for event in reversed(events):
        if isinstance(event, ev.TurnEnd):
            return None
        if isinstance(event, ev.TurnStart | ev.TurnResume):
            return event.turn_id
    return None


def streamed_output(events: Sequence[ev.Event]) -> tuple[str, str]:
    """(text, reasoning) checkpointed after the last complete model output."""
    text: list[str] = []
    reasoning: list[str] = []
    for event in events:
        if isinstance(event, ev.ChatCheckpoint):
            if event.discard:
                text.clear()
                reasoning.clear()
            text.append(event.message or "")
            reasoning.append(event.reasoning or "")
        elif not isinstance(event, (ev.InquiryRequest, ev.InquiryResponse)):
            # A model output written whole (or a new request) supersedes checkpoints.
            text.clear()
            reasoning.clear()
    return "".join(text), "".join(reasoning)


def recovery_events(events: Sequence[ev.Event]) -> list[ev.Event]:
    """What to append to close the last turn of `events`; [] when it is closed."""
    turn_id = open_turn(events)
    if turn_id is None:
        return []
    # A resumed turn's earlier parts were closed by an earlier recovery.
    start = max(i for i, e in enumerate(events) if isinstance(e, ev.TurnStart | ev.TurnResume))
    turn = events[start:]
    out: list[ev.Event] = []
    answered = {e.id for e in turn if isinstance(e, ev.InquiryResponse)}
    for event in turn:
        if isinstance(event, ev.InquiryRequest) and event.id not in answered:
            out.append(
                ev.InquiryResponse(response=ev.Cancelled(id=event.id, reason="daemon_stopped"))
            )
    text, reasoning = streamed_output(turn)
    if reasoning:
        out.append(ev.ChatResponse(reasoning=reasoning, interrupted=True))
    if text:
        out.append(ev.ChatResponse(message=text, interrupted=True))
    responded = {e.id for e in turn if isinstance(e, ev.ToolCallResponse)}
    for event in turn:
        if isinstance(event, ev.ToolCallRequest) and event.id not in responded:
            responded.add(event.id)
            out.append(
                ev.ToolCallResponse(
                    id=event.id, content=INTERRUPTED_TOOL, is_error=True, interrupted=True
                )
            )
    out.append(ev.TurnEnd(turn_id=turn_id, stop_reason="interrupted", error=INTERRUPTED_TURN))
    return out


def interrupted_turn(log_file: Path) -> ev.TurnStart | None:
    """The `turn_start` of the log's last turn when that turn ended `interrupted` (it can
    be resumed, protocol.md 12.4), else None. Reads the log backwards: a tail read."""
    return last_turn(log_file)[1]


def last_turn(log_file: Path) -> tuple[bool, ev.TurnStart | None]:
    """One tail read of the log's last turn: (open, resumable start). Open: no `turn_end`
    after its start (or its latest `turn_resume`). Resumable start: its `turn_start` when
    it ended `interrupted`, else None."""
    ended = False
    for line in reverse_lines(log_file):
        if b'"type":"turn_end"' in line:
            if not ended and b'"stop_reason":"interrupted"' not in line:
                return False, None
            ended = True
        elif b'"type":"turn_resume"' in line and not ended:
            return True, None  # running, or not recovered yet
        elif b'"type":"turn_start"' in line:
            if not ended:
                return True, None
            try:
                event = ev.parse_event(line)
            except ValueError:
                return False, None
            return False, event if isinstance(event, ev.TurnStart) else None
    return False, None


# --- applying it to the store --------------------------------------------------------


def lock_turn(store: ConversationStore, conversation_id: str) -> TurnLock | None:
    """Take the conversation's turn lock (see `turn_lock`); None if a live daemon holds
    it. Raises `ConversationNotFound` if the conversation does not exist."""
    directory = store.conversation_dir(conversation_id)
    if not (directory / EVENTS_FILE).is_file():
        raise ConversationNotFound(conversation_id)
    return try_lock(directory)


def recover(store: ConversationStore, conversation_id: str) -> int:
    """Close the conversation's last turn if a stopped daemon left it open.

    The caller holds the turn lock. Returns the number of events appended.
    """
    if not last_turn_is_open(store.conversation_dir(conversation_id) / EVENTS_FILE):
        return 0
    appended = recovery_events(store.load(conversation_id, sanitized=False))
    for event in appended:
        store.append(conversation_id, event)
    if appended:
        store.sync(conversation_id)
        store.release(conversation_id)  # its metadata.json is written; nothing stays in memory
        log.warning("conversation %s: closed a turn its daemon left open", conversation_id)
    return len(appended)


def recover_all(store: ConversationStore) -> dict[str, ev.TurnStart]:
    """At start-up: `recover` each conversation whose last turn is open and whose lock is
    free, and return conversation id -> `turn_start` of each last turn that ended
    `interrupted` (now or before). One tail read per log, two for an open one."""
    try:
        entries = list(os.scandir(store.root / "conversations"))
    except FileNotFoundError:
        return {}
    found: dict[str, ev.TurnStart] = {}
    for entry in entries:
        if not is_valid_id(entry.name):
            continue
        log_file = Path(entry.path) / EVENTS_FILE
        is_open, start = last_turn(log_file)
        if is_open:  # recovered now, or by another daemon meanwhile, or still running
            _recover_unlocked(store, entry.name)
            start = interrupted_turn(log_file)
        if start is not None:
            found[entry.name] = start
    return found


def _recover_unlocked(store: ConversationStore, conversation_id: str) -> None:
    """`recover` under the turn lock, unless a live daemon holds it."""
    try:
        lock = lock_turn(store, conversation_id)
    except (ConversationNotFound, OSError):
        return
    if lock is None:
        return  # a live daemon runs this turn
    try:
        recover(store, conversation_id)
    except OSError as exc:
        log.warning("could not recover conversation %s: %s", conversation_id, exc)
    finally:
        lock.release()
