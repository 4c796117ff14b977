"""`tool/call`: one tool run outside an LLM turn, through the same coordinator as a
turn's tools (questions and permissions included), recorded in the conversation it
names or nowhere."""

from __future__ import annotations

import secrets
from typing import Any

from jpd.core.conversations import check_id
from jpd.core.parts import DaemonParts
from jpd.protocol.client_port import ClientLink
from jpd.protocol.environment import ClientEnvironment
from jpd.protocol.errors import NotFound


class ToolCalls:
    """Runs `tool/call`s with the daemon's parts."""

    def __init__(self, parts: DaemonParts) -> None:
        self._parts = parts

    async def call(
        self,
        link: ClientLink,
        name: str,
        arguments: dict[str, Any],
        conversation_id: str | None,
        detached: Any = None,
        environment: ClientEnvironment | None = None,
    ) -> tuple[str, bool]:
        """Run one tool outside a turn, through the coordinator (questions included)."""
        from jpd.conversation import events as ev
        from jpd.core.turn_tools import NullLog
        from jpd.llm.base import ToolCallPart

        parts = self._parts
        hub = parts.hub
        renv = parts.request_env(link, environment)
        cfg = await parts.configs.for_request(renv)
        call_id = "call-" + secrets.token_hex(6)
        log: Any = NullLog()
        channel = conversation_id or call_id
        if conversation_id is not None:
            check_id(conversation_id)
            if not await parts.store.exists(conversation_id):
                raise NotFound(f"conversation not found: {conversation_id}")
            # Its events would land inside the running turn's window of the log.
            parts.turns.check_idle(conversation_id)
            log = parts.store
        coordinator = parts.tools.coordinator(
            cfg,
            renv,
            await parts.tools.catalog(cfg, [], renv.root),
            log=log,
            backend=None,
            channel=channel,
            call_id=call_id,
            detached=detached,
        )
        call = ToolCallPart(id=call_id, name=name, arguments=arguments)
        log.append(channel, ev.ToolCallRequest(id=call_id, name=name, arguments=arguments))
        # The log grew outside a turn: its history is reloaded next time.
        parts.conversations.histories.pop(channel, None)
        was_subscribed = any(s.link_id == link.link_id for s in hub.subscribers(channel))
        if conversation_id is None:
            hub.ephemeral(channel)
        else:
            await hub.prepare(channel)
        hub.subscribe(channel, link)  # so that this client is asked the tool's questions
        try:
            content, is_error = await coordinator.run_one(call)
        finally:
            if conversation_id is None:
                hub.discard(channel)
            elif not was_subscribed:
                hub.unsubscribe(channel, link)
        log.append(channel, ev.ToolCallResponse(id=call_id, content=content, is_error=is_error))
        await log.sync(channel)
        if conversation_id is not None:
            await parts.turns.settle(conversation_id)
        return content, is_error
