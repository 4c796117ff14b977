"""What a session tells the editor about itself besides the turns: the models it may
pick (from the daemon's `model/list`), its slash commands and its title."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from acp.schema import SessionInfoUpdate

from jpcli.acp import commands
from jpcli.acp.config_options import Choices
from jpcli.acp.link import LinkClosed, LinkError
from jpcli.acp.session import Session

log = logging.getLogger(__name__)


async def load_choices(session: Session, environment: dict[str, Any]) -> Choices:
    """The models this session's environment can use (`model/list`); the default model
    only when the daemon cannot say (the session must still open)."""
    try:
        listed = await session.daemon.request("model/list", {"environment": environment})
    except (LinkError, LinkClosed) as exc:
        log.warning("model/list failed: %s", exc)
        return Choices()
    return Choices.from_listing(listed if isinstance(listed, dict) else {})


async def send_title(session: Session) -> None:
    """`session_info_update` with the conversation's title, when it has one."""
    try:
        listed = await session.daemon.request("conversation/list")
    except (LinkError, LinkClosed) as exc:
        log.warning("conversation/list failed: %s", exc)
        return
    for item in listed.get("conversations", []):
        if item.get("conversationId") != session.session_id or not item.get("title"):
            continue
        if item["title"] != session.title:
            session.title = item["title"]
            info = SessionInfoUpdate(
                session_update="session_info_update",
                title=item["title"],
                updated_at=item.get("updatedAt"),
            )
            await session.send([info])
        return


async def announce(session: Session) -> None:
    """The slash commands (and the title of an existing conversation), sent just after
    the `session/new`/`load`/`resume` response: the editor must know the session first."""
    await asyncio.sleep(0.05)  # the SDK writes the response meanwhile
    with contextlib.suppress(LinkClosed, LinkError, ConnectionError, OSError):
        await session.send([commands.available_commands()])
        if session.exists:
            await send_title(session)
