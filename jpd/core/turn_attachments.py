"""A turn's attachments, read when it starts (`turn_start`): the conversation's kept
ones go into the system prompt (their current content each turn), the message's into
the message (kept in the log)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jpd.core.parts import DaemonParts
from jpd.core.request_env import RequestEnv
from jpd.protocol.turn_requests import ImageInput

if TYPE_CHECKING:
    from jpd.core.turn import Turn
    from jpd.llm.history import MessageHistory


async def attach(
    parts: DaemonParts,
    turn: Turn,
    renv: RequestEnv,
    conversation_id: str | None,
    given: list[str],
    history: MessageHistory,
) -> list[ImageInput]:
    """Read the conversation's attachments and the message's into `turn`; a missing
    file or a failing URL raises `InvalidParams` before anything is sent. Returns
    the images and PDFs among them, to go with the message: a kept one only while
    the model's messages do not already hold that content (sent once, and again
    after it changed or a compaction dropped it)."""
    kept: list[str] = []
    if conversation_id is not None:
        store = parts.store
        found_kept = await store.attributes(conversation_id)
        kept = list(found_kept.attachments)
    if not kept and not given:
        return []  # the common case: nothing of the attachments' readers loads
    from jpd.core.attachments import binaries, conversation_reader, render, resolve
    from jpd.llm.base import UserMessage

    conversation_text = conversation_reader(parts.store)
    spec = turn.spec
    found_binaries: list[ImageInput] = []
    if kept:
        found = await resolve(
            kept, root=renv.root, env=renv.env, conversation_text=conversation_text
        )
        text = render(found)
        spec.system = "\n\n".join(part for part in (spec.system, text) if part)
        kept_binaries = binaries(found)
        if kept_binaries:  # the history is walked only when there are any
            sent = {
                image.data
                for message in history.messages()
                if isinstance(message, UserMessage)
                for image in message.images
            }
            found_binaries += [b for b in kept_binaries if b.data not in sent]
    if given:
        found = await resolve(
            given, root=renv.root, env=renv.env, conversation_text=conversation_text
        )
        text = render(found)
        spec.message = f"{spec.message}\n\n{text}" if text else spec.message
        found_binaries += binaries(found)
    spec.attachments = [*kept, *given]
    return found_binaries
