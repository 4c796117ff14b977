"""The conversation a turn starts in (`turn_start`): its history is read first (a busy
conversation, or a `create` of an existing one, refused there), and the conversation
is taken last, once everything is valid: created, its turn lock taken, or the lease a
fleet's queue claimed for it used; then the turn runs (`RunningTurns`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from jpd.core.conversations import check_id
from jpd.core.parts import DaemonParts
from jpd.protocol.client_port import ClientLink
from jpd.protocol.errors import Busy, InvalidParams

if TYPE_CHECKING:
    from jpd.conversation.port import TurnLease
    from jpd.core.prompt_images import PromptImage
    from jpd.core.turn import Turn
    from jpd.llm.history import MessageHistory


async def start_history(
    parts: DaemonParts, conversation_id: str | None, create: bool
) -> MessageHistory:
    """The messages a turn continues from (none for a new conversation)."""
    from jpd.llm.history import MessageHistory

    if conversation_id is None:
        if create:
            raise InvalidParams("create needs a conversationId")
        return MessageHistory()
    if create:
        check_id(conversation_id)
        if await parts.store.exists(conversation_id):
            raise InvalidParams(f"conversation {conversation_id} already exists")
        return MessageHistory()
    parts.turns.check_idle(conversation_id)
    return await parts.conversations.history(conversation_id)


async def launch(
    parts: DaemonParts,
    tg: TaskGroup,
    turn: Turn,
    link: ClientLink,
    *,
    is_new: bool,
    images: list[PromptImage] | None = None,
    lease: TurnLease | None = None,
) -> None:
    """Everything is valid: only now does a new conversation reach the disk."""
    conversation_id = turn.conversation_id
    conversations, turns = parts.conversations, parts.turns
    if lease is not None:  # claimed from a fleet's queue
        lock = lease
    elif is_new:
        lock = await conversations.create(conversation_id)
    else:
        await turns.let_go(conversation_id)  # the lease of a turn that just ended here
        turns.check_idle(conversation_id)  # again: another turn may have started meanwhile
        lock = await conversations.lock_turn(conversation_id)
    try:
        turns.check_idle(conversation_id)  # and again after the lock's await
    except Busy:
        await lock.release()
        raise
    if images:
        from jpd.core import prompt_images

        folder = parts.store.conversation_dir(conversation_id)
        try:
            await anyio.to_thread.run_sync(prompt_images.write, folder, images)
        except OSError as exc:
            await lock.release()
            raise InvalidParams(f"cannot keep the images: {exc}") from None
        if turns.relay is not None:  # a fleet: for a member taking over
            tg.start_soon(turns.share_blobs, conversation_id)
    if is_new:
        # Durable while the model call runs, not on the way to turn_completed.
        conversations.sync_entries_soon(conversation_id, tg)
    conversations.remember_history(conversation_id, turn.transcript.history)
    conversations.resumable.pop(conversation_id, None)  # no longer the last turn, or resumed
    turns.run(turn, lock, link)
