"""The handlers of the `conversation/*` methods (`jpd.rpc.methods` maps the method
table to them): thin functions over the daemon core."""

from __future__ import annotations

import json
import logging

from jpd.core.daemon import Daemon
from jpd.protocol.base import WireModel
from jpd.protocol.conversation_requests import (
    ConversationCompactParams,
    ConversationDeleteResult,
    ConversationForkParams,
    ConversationGrepParams,
    ConversationIdParams,
    ConversationListParams,
    ConversationListResult,
    ConversationUpdateParams,
    ConversationUpdateResult,
)
from jpd.rpc.pygls_private import EncodedResult
from jpd.rpc.session import Session

log = logging.getLogger(__name__)


async def conversation_list(
    daemon: Daemon, session: Session, p: ConversationListParams
) -> WireModel:
    """The stored conversations `p` selects, pinned then most recently updated first."""
    return ConversationListResult(conversations=await daemon.list_conversations(p))


async def conversation_update(
    daemon: Daemon, session: Session, p: ConversationUpdateParams
) -> WireModel:
    """Change a conversation's title, labels, archived, pinned or expiry (5.26)."""
    if p.add_attachments:  # read once now: a missing file is an error here, not later
        await daemon.check_attachments(session, p.add_attachments, p.environment)
    return ConversationUpdateResult(conversation=await daemon.organize.update(p))


async def conversation_fork(
    daemon: Daemon, session: Session, p: ConversationForkParams
) -> WireModel:
    """A new conversation carrying a copy of some or all turns of another (5.27)."""
    return await daemon.organize.fork(p)


async def conversation_grep(
    daemon: Daemon, session: Session, p: ConversationGrepParams
) -> WireModel:
    """Matching message lines across conversations (5.28)."""
    return await daemon.organize.grep(p)


async def conversation_get(
    daemon: Daemon, session: Session, p: ConversationIdParams
) -> EncodedResult:
    """A conversation's persisted events."""
    events = await daemon.get_conversation(p.conversation_id)
    # The stored events are spliced into the answer as they are (no decode/re-encode);
    # the shape is `ConversationGetResult`'s.
    head = json.dumps({"conversationId": p.conversation_id})[:-1].encode()
    # One copy, made by `bytes.join` without the GIL (see framing.encode_frame).
    return EncodedResult(b"".join((head, b', "events": ', events, b"}")))


async def conversation_delete(
    daemon: Daemon, session: Session, p: ConversationIdParams
) -> WireModel:
    """Delete a conversation and its log."""
    await daemon.delete_conversation(p.conversation_id)
    return ConversationDeleteResult(deleted=True)


async def conversation_compact(
    daemon: Daemon, session: Session, p: ConversationCompactParams
) -> WireModel:
    """Compact a conversation now (protocol.md 5.25)."""
    return await daemon.compact_conversation(session, p.conversation_id, p.instructions)
