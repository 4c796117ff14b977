"""`session/prompt`'s turn: the `turn/start` the prompt becomes, and the wait for the
turn's end while its events stream to the editor."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from acp import RequestError

from jpcli.acp.daemon_errors import request_error
from jpcli.acp.inputs import prompt_images
from jpcli.acp.link import LinkClosed, LinkError
from jpcli.acp.session import Ended, Session
from jpcli.rpc import INTERNAL_ERROR

log = logging.getLogger(__name__)


def turn_start_params(
    session: Session, message: str, prompt: list[Any], environment: dict[str, Any]
) -> dict[str, Any]:
    """The `turn/start` params of a prompt: its message and images, the session's
    choices (model, effort, mode) and config, in the session's environment."""
    params: dict[str, Any] = {
        "message": message,
        "conversationId": session.session_id,
        # As `jp` does (protocol.md 5.5): the turn runs with the environment the
        # editor started the bridge with, in the session's workspace.
        "environment": environment,
    }
    if not session.exists:
        params["create"] = True
    images = prompt_images(prompt)
    if images:
        params["images"] = images
    chosen = session.choices.turn_params()
    config = {**session.config, **chosen.pop("config", {})}
    params.update(chosen)
    if config:
        params["config"] = config
    return params


async def run_turn(session: Session, params: dict[str, Any]) -> Ended:
    """Start the turn and wait for its end (`session.settle` answers the wait); a
    cancel that came while `turn/start` was on its way cancels it."""
    waiting: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    session.prompt, session.prompt_turn, session.cancel_requested = waiting, None, False
    try:
        try:
            started = await session.daemon.request("turn/start", params)
        except (LinkError, LinkClosed) as exc:
            raise request_error(exc) from None
        session.exists = True
        session.prompt_turn = started["turnId"]
        session.settle(started["turnId"])
        if session.cancel_requested:
            await cancel_turn(session, started["turnId"])
        closed = asyncio.ensure_future(session.daemon.closed.wait())
        try:
            await asyncio.wait({waiting, closed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()
        if not waiting.done():
            raise RequestError(INTERNAL_ERROR, "jpd closed the connection during the turn")
        try:
            ended: Ended = waiting.result()
        except LinkClosed as exc:
            raise request_error(exc) from None
        return ended
    finally:
        session.prompt = None


async def cancel_turn(session: Session, turn_id: str) -> None:
    """`turn/cancel`; a failure is logged (the turn ends anyway when the daemon goes)."""
    try:
        await session.daemon.request("turn/cancel", {"turnId": turn_id})
    except (LinkError, LinkClosed) as exc:
        log.warning("turn/cancel failed: %s", exc)
