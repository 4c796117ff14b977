"""Titles written by a model (JP's `conversation.title.generate`): after a new
conversation's first turn, a short request to the title model names it, unless the
conversation has a title already. A title the user sets is never replaced
(jpd/conversation/attributes.py)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from jpd.conversation.attributes import Attributes
from jpd.conversation.port import ConversationNotFound
from jpd.protocol.labels import check_title

if TYPE_CHECKING:
    from jpd.config import Config
    from jpd.conversation.port import ConversationStorage
    from jpd.core.parts import DaemonParts
    from jpd.core.turn import Turn
    from jpd.llm.registry import ProviderSource

log = logging.getLogger(__name__)

INSTRUCTION = (
    "Write a title for the conversation below: at most eight words, no quotes, no "
    "final period. Reply with the title only."
)
MAX_INPUT = 4000  # characters of the exchange sent: a title needs the gist only


def title_model(cfg: Config) -> str | None:
    """The model that writes this conversation's title, or None (no title written)."""
    generate = cfg.conversation.title.generate
    return generate.model if generate.auto else None


async def write_title(
    cfg: Config,
    providers: ProviderSource,
    store: ConversationStorage,
    conversation_id: str,
    request: str,
    answer: str,
) -> None:
    """Ask the title model for a title of `request` and `answer` and keep it (a failure
    is logged: a conversation without a title lists by its first message)."""
    from jpd.config import ConfigError
    from jpd.llm import base as llm
    from jpd.llm.errors import ProviderError, ProviderUnavailable

    model = title_model(cfg)
    if model is None:
        return
    existing = await store.attributes(conversation_id)
    if existing.title:
        return
    exchange = f"User: {request}\n\nAssistant: {answer}"[:MAX_INPUT]
    try:
        titled = cfg.with_model(cfg.resolve_model(model), source="conversation.title")
        provider = providers.get(titled)
        message = llm.UserMessage(content=exchange)
        request_ = llm.ModelRequest(
            model=titled.assistant.model.name,
            system=INSTRUCTION,
            messages=(message,),
            max_tokens=40,
        )
        texts: list[str] = []
        async with provider.stream(request_) as events:
            async for event in events:
                if isinstance(event, llm.TextDelta):
                    texts.append(event.text)
    except (ProviderError, ProviderUnavailable, ConfigError, ValueError) as exc:
        log.info("no title for %s: %s", conversation_id, exc)
        return
    except Exception:
        log.exception("writing the title of %s failed", conversation_id)
        return
    text = "".join(texts).strip().strip("\"'").rstrip(".")
    if not text:
        return

    def keep(current: Attributes) -> Attributes:
        if current.title:  # the user named it meanwhile
            return current
        return current.model_copy(update={"title": check_title(text), "title_source": "model"})

    await store.update_attributes(conversation_id, keep)


async def title_after_first_turn(
    parts: DaemonParts, turn: Turn, cfg: Config, providers: ProviderSource
) -> None:
    """Name a new conversation after its first turn, once that turn ended well."""
    await parts.turns.wait_released(turn.turn_id)
    if turn.stop_reason != "end_turn":
        return
    store, cid = parts.store, turn.conversation_id
    try:
        events = await store.load(cid)
    except ConversationNotFound:
        return  # deleted meanwhile (--no-persist)
    request, answer = first_exchange(list(events))
    try:
        await write_title(cfg, providers, store, cid, request, answer)
    except (OSError, ConversationNotFound) as exc:  # deleted meanwhile, a full disk
        log.info("no title for %s: %s", cid, exc)


def first_exchange(events: list[object]) -> tuple[str, str]:
    """The first user message and the model's first answer in `events`."""
    from jpd.conversation import events as ev

    request = next((e.content for e in events if isinstance(e, ev.ChatRequest)), "")
    answer = next((e.message for e in events if isinstance(e, ev.ChatResponse) and e.message), "")
    return request, answer or ""
