"""The handlers of the `turn/*` and `inquiry/*` methods (`jpd.rpc.methods` maps the
method table to them): thin functions over the daemon core."""

from __future__ import annotations

import logging

from jpd.core.daemon import Daemon
from jpd.core.turn_enqueue import start_options
from jpd.protocol.base import NoParams, WireModel
from jpd.protocol.errors import InvalidParams
from jpd.protocol.server_requests import InquiryAnswerParams, InquiryAnswerResult, InquiryListResult
from jpd.protocol.turn_requests import (
    TurnAttachParams,
    TurnAttachResult,
    TurnCancelParams,
    TurnCancelResult,
    TurnChangesParams,
    TurnDetachParams,
    TurnDetachResult,
    TurnListResult,
    TurnResumeParams,
    TurnResumeResult,
    TurnStartParams,
    TurnStartResult,
    TurnUndoParams,
    TurnUndoResult,
    TurnWaitParams,
    TurnWaitResult,
)
from jpd.rpc.handler_types import OnLoop
from jpd.rpc.pygls_private import EncodedResult
from jpd.rpc.session import Session
from jpd.rpc.turn_listing import TurnListing

log = logging.getLogger(__name__)


async def turn_start(daemon: Daemon, session: Session, p: TurnStartParams) -> WireModel:
    """Start a turn in the daemon and return its ids at once."""
    if not p.persist and p.conversation_id is not None and not p.create:
        raise InvalidParams("persist: false is for a new conversation only")
    info = await daemon.start_turn(
        session,
        p.message,
        create=p.create,
        **start_options(p),
    )
    await daemon.after_start(info, p)
    try:
        warnings = await daemon.configs.file_warnings(daemon.request_env(session, p.environment))
    except Exception:  # the turn runs already: a note about keys must not fail it
        log.exception("config warnings")
        warnings = []
    return TurnStartResult(
        conversation_id=info.conversation_id, turn_id=info.turn_id, config_warnings=warnings or None
    )


async def turn_cancel(daemon: Daemon, session: Session, p: TurnCancelParams) -> WireModel:
    """Cancel a running turn (False if it is not running); in a fleet, also one queued or
    running on another member."""
    return TurnCancelResult(cancelled=await daemon.cancel_turn_anywhere(p.turn_id))


async def turn_resume(daemon: Daemon, session: Session, p: TurnResumeParams) -> WireModel:
    """Continue an interrupted turn under its id and return at once (protocol.md 5.21)."""
    info = await daemon.resume_turn(
        session, p.conversation_id, p.turn_id, detached=p.detached, environment=p.environment
    )
    return TurnResumeResult(conversation_id=info.conversation_id, turn_id=info.turn_id)


async def turn_wait(daemon: Daemon, session: Session, p: TurnWaitParams) -> WireModel:
    """Wait until a running turn ends (cancelling this request leaves the turn running)."""
    stop = await daemon.wait_turn(p.turn_id)
    return TurnWaitResult(turn_id=p.turn_id, stop_reason=stop)


async def turn_attach(daemon: Daemon, session: Session, p: TurnAttachParams) -> WireModel:
    """Subscribe to a conversation's events, replaying those after `fromSeq`."""
    session.on_attach(p.conversation_id)
    last, oldest = await daemon.attach(session, p.conversation_id, p.from_seq)
    running = [t for t in daemon.running_turns() if t.conversation_id == p.conversation_id]
    return TurnAttachResult(
        conversation_id=p.conversation_id,
        last_seq=last,
        oldest_seq=oldest,
        running_turns=running,
    )


async def turn_detach(daemon: Daemon, session: Session, p: TurnDetachParams) -> WireModel:
    """Stop receiving a conversation's events; its turns keep running."""
    return TurnDetachResult(detached=daemon.detach(session, p.conversation_id))


async def turn_list(daemon: Daemon, session: Session, p: NoParams) -> WireModel:
    """Running turns, then resumable ones, and pending inquiries."""
    return TurnListResult(
        turns=await daemon.list_turns(), inquiries=await daemon.inquiries.pending()
    )


def turn_list_now(
    daemon: Daemon, session: Session, p: NoParams, on_loop: OnLoop
) -> EncodedResult | None:
    """`turn_list` at once (None during the start-up recovery: then `turn_list` waits)."""
    turns = daemon.listed_turns()
    if turns is None:  # also in a fleet, where the store is read (`turn_list`)
        return None
    return _LISTING.result(turns, daemon.inquiries.pending_here())


_LISTING = TurnListing()


def turn_cancel_now(
    daemon: Daemon, session: Session, p: TurnCancelParams, on_loop: OnLoop
) -> WireModel | None:
    """`turn_cancel`, which never waits: a running turn is cancelled on the loop (None:
    in a fleet, a turn not running here, which `turn_cancel` looks for in the store)."""
    running = daemon.is_running(p.turn_id)
    if running:
        # An `inquiry/answer` read after this answer finds the turn's questions gone.
        daemon.inquiries.close_turn(p.turn_id)
        on_loop(lambda: daemon.cancel_turn(p.turn_id))
        return TurnCancelResult(cancelled=True)
    return None if daemon.queue is not None else TurnCancelResult(cancelled=False)


async def turn_undo(daemon: Daemon, session: Session, p: TurnUndoParams) -> WireModel:
    """Restore the files a turn changed; record that in the conversation."""
    done = await daemon.undo_turn(p.conversation_id, p.turn_id)
    return TurnUndoResult(turn_id=done.turn_id, restored=done.restored, removed=done.removed)


async def turn_changes(daemon: Daemon, session: Session, p: TurnChangesParams) -> WireModel:
    """The files a turn changed, with their text before it."""
    return await daemon.turn_changes(p.conversation_id, p.turn_id)


async def inquiry_list(daemon: Daemon, session: Session, p: NoParams) -> WireModel:
    """Questions and permission requests waiting for an answer."""
    return InquiryListResult(inquiries=await daemon.inquiries.pending())


async def inquiry_answer(daemon: Daemon, session: Session, p: InquiryAnswerParams) -> WireModel:
    """Answer a pending question (e.g. a deferred one, or from a second client)."""
    await daemon.inquiries.answer(
        session, p.inquiry_id, p.answer, p.remember, p.conversation_id, p.turn_id
    )
    return InquiryAnswerResult(accepted=True)
