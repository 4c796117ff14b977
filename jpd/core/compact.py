"""`conversation/compact`: compact a conversation now, between turns (protocol.md 5.25).

It holds the conversation's turn lock while the summary is written, so no turn runs
meanwhile; the `context_compacted` event is appended only once the summary is complete.
"""

from __future__ import annotations

from jpd.core.conversations import check_id
from jpd.core.parts import DaemonParts
from jpd.llm.registry import ProviderRegistry
from jpd.protocol.client_port import ClientLink
from jpd.protocol.conversation_requests import ConversationCompactResult
from jpd.protocol.errors import ProviderUnavailableError


async def compact_conversation(
    parts: DaemonParts,
    providers: ProviderRegistry,
    link: ClientLink,
    conversation_id: str,
    instructions: str | None,
) -> ConversationCompactResult:
    """Fold the conversation's older part into a summary now (trigger `manual`)."""
    from jpd.context.setup import keeper_factory
    from jpd.conversation import events as ev
    from jpd.llm.base import ModelRequest
    from jpd.llm.errors import ProviderUnavailable

    check_id(conversation_id)
    parts.turns.check_idle(conversation_id)
    renv = parts.request_env(link, None)
    cfg = await parts.configs.for_turn(renv, None, None)
    source = providers.bound(renv.env)
    try:
        provider = source.get(cfg)
    except ProviderUnavailable as exc:
        raise ProviderUnavailableError(exc.message) from exc
    history = await parts.conversations.history(conversation_id)
    lock = await parts.conversations.lock_turn(conversation_id)
    try:
        parts.turns.check_idle(conversation_id)

        def record(event: ev.ContextCompacted) -> None:
            parts.store.append(conversation_id, event)
            history.add(event)

        keeper = keeper_factory(cfg, provider, source)(history, record)
        request = keeper.rebuild(
            ModelRequest(
                model=cfg.assistant.model.name, system=cfg.assistant.system_prompt, messages=()
            )
        )
        event = await keeper.compact(request, "manual", instructions)
        await parts.store.sync(conversation_id)
    finally:
        await lock.release()
    if event is None:
        return ConversationCompactResult(compacted=False)
    return ConversationCompactResult(
        compacted=True,
        method=event.method,
        tokens_before=event.tokens_before,
        tokens_after=event.tokens_after,
        summary=event.summary,
    )
