"""Closing a turn that a stopped daemon left open (protocol.md section 12.4).

A daemon killed mid-turn leaves a log whose last turn has no `turn_end`. Recovery
appends what makes that turn whole again, never rewriting a line: a cancellation
(`daemon_stopped`) for each question left unanswered, the output that was streaming
(from its checkpoints) as an interrupted `chat_response`, an interrupted error response
for each tool call left without one, and `turn_end` with `stop_reason: "interrupted"`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from jpd.conversation import events as ev
from jpd.conversation.port import ConversationNotFound, ConversationStorage, LeaseLost

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


# --- applying it to the store --------------------------------------------------------


async def recover(store: ConversationStorage, conversation_id: str) -> int:
    """Close the conversation's last turn if a stopped daemon left it open.

    The caller holds the turn lease. Returns the number of events appended.
    """
    if not (await store.last_turn(conversation_id))[0]:
        return 0
    appended = recovery_events(await store.load(conversation_id, sanitized=False))
    for event in appended:
        store.append(conversation_id, event)
    if appended:
        await store.sync(conversation_id)
        await store.release(conversation_id)  # its summary is written; nothing stays in memory
        log.warning("conversation %s: closed a turn its daemon left open", conversation_id)
    return len(appended)


async def recover_all(store: ConversationStorage) -> dict[str, ev.TurnStart]:
    """At start-up: `recover` each conversation whose last turn is open and whose lease
    is free, and return conversation id -> `turn_start` of each last turn that ended
    `interrupted` (now or before). One scan of the last turns, then a read per open one."""
    found: dict[str, ev.TurnStart] = {}
    for conversation_id, is_open, start in await store.scan_turns():
        if is_open:  # recovered now, or by another daemon meanwhile, or still running
            await recover_unlocked(store, conversation_id)
            start = (await store.last_turn(conversation_id))[1]
        if start is not None:
            found[conversation_id] = start
    return found


async def recover_unlocked(store: ConversationStorage, conversation_id: str) -> int:
    """`recover` under the turn lease, unless a live daemon holds it; the number of
    events appended (0: nothing was open, or another daemon holds the lease)."""
    try:
        lease = await store.lock_turn(conversation_id)
    except (ConversationNotFound, OSError):
        return 0
    if lease is None:
        return 0  # a live daemon runs this turn
    try:
        return await recover(store, conversation_id)
    except (OSError, LeaseLost) as exc:
        log.warning("could not recover conversation %s: %s", conversation_id, exc)
        return 0
    finally:
        await lease.release()
