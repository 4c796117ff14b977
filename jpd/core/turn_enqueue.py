"""A turn started on a fleet member without room (`core.turn_queue`): validated here
like any turn, then queued with the `turn/start` params the member that claims it
needs to start it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jpd.core.parts import DaemonParts
from jpd.core.running_turns import turn_info
from jpd.protocol.client_port import ClientLink
from jpd.protocol.environment import ClientEnvironment
from jpd.protocol.modes import PermissionMode
from jpd.protocol.summaries import TurnInfo
from jpd.protocol.turn_requests import ImageInput, ToolToggle

if TYPE_CHECKING:
    from jpd.core.turn import Turn
    from jpd.core.turn_queue import TurnQueue
    from jpd.protocol.turn_requests import TurnStartParams


def queued_request(
    *,
    message: str,
    conversation_id: str | None,
    model: str | None,
    config: Mapping[str, Any] | None,
    toggles: list[ToolToggle] | None,
    detached: Any,
    environment: ClientEnvironment | None,
    mode: PermissionMode,
    images: list[ImageInput] | None,
    response_schema: dict[str, Any] | None,
    config_files: list[str] | None,
    attachments: list[str] | None,
) -> TurnStartParams:
    """What any member needs to start the turn (the config before `config_files`)."""
    from jpd.protocol.turn_requests import TurnStartParams

    return TurnStartParams(
        message=message,
        conversation_id=conversation_id,
        model=model,
        config=dict(config) if config is not None else None,
        tools=toggles or [],
        detached=detached,
        environment=environment,
        mode=mode,
        images=images or [],
        response_schema=response_schema,
        config_files=config_files or [],
        attachments=attachments or [],
    )


def start_options(p: TurnStartParams) -> dict[str, Any]:
    """The keyword arguments of `TurnStarter.start` that a `turn/start`'s params carry
    (the inverse of `queued_request`): one mapping for the handler and the queue."""
    return {
        "conversation_id": p.conversation_id,
        "model": p.model,
        "config": p.config,
        "toggles": list(p.tools),
        "detached": p.detached,
        "mode": p.mode,
        "images": p.images,
        "environment": p.environment,
        "response_schema": p.response_schema,
        "config_files": p.config_files,
        "attachments": p.attachments,
    }


async def enqueue(
    parts: DaemonParts,
    queue: TurnQueue,
    link: ClientLink,
    turn: Turn,
    request: TurnStartParams,
    *,
    is_new: bool,
) -> TurnInfo:
    """Queue the assembled `turn` under its conversation id; a new conversation is
    listed at once, its lease left to the queue."""
    if is_new:
        await parts.conversations.create_unlocked(turn.conversation_id)
    request = request.model_copy(update={"conversation_id": turn.conversation_id})
    await queue.enqueue(link, turn, request)
    return turn_info(turn)
