"""`jp acp` asks the editor whether to trust a workspace's config (protocol.md
"Workspace config trust"): once per file and bridge, before the first prompt of a
session in that workspace, as a `session/request_permission` titled "Trust this
workspace's config?". Until then the daemon ignores the file; an editor that cannot ask
or is dismissed leaves it ignored.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping

from acp import RequestError, text_block, tool_content, update_tool_call
from acp.schema import AllowedOutcome, PermissionOption, ToolCallUpdate

from jpcli import trust
from jpcli.acp.session import Editor

log = logging.getLogger(__name__)

TITLE = "Trust this workspace's config?"
TRUST_OPTIONS = [
    PermissionOption(option_id="trust", name="Trust it", kind="allow_always"),
    PermissionOption(option_id="ignore", name="Ignore it", kind="reject_once"),
]


async def offer_trust(
    editor: Editor, session_id: str, cwd: str, env: Mapping[str, str], asked: set[str]
) -> bool:
    """Ask about `cwd`'s untrusted workspace config, if any and not asked yet; trust it
    when the editor says so. Returns whether it was trusted now."""
    path = trust.workspace_config(cwd)
    real = await asyncio.to_thread(_to_ask, path, env, asked)  # file reads: off the loop
    if real is None:
        return False
    asked.add(real)
    shown, digest = await asyncio.to_thread(trust.describe, path, env)
    entry = f"trust-{session_id}-{len(asked)}"
    call = ToolCallUpdate(
        tool_call_id=entry,
        title=TITLE,
        kind="other",
        status="pending",
        raw_input={"path": path},
        content=[tool_content(text_block(shown))],
    )
    try:
        response = await editor.request_permission(session_id, call, TRUST_OPTIONS)
    except RequestError as exc:
        log.info("the editor could not ask about %s: %s", path, exc)
        return False
    outcome = response.outcome
    trusted = isinstance(outcome, AllowedOutcome) and outcome.option_id == "trust"
    # The request made an entry in the editor: finish it (never left in progress).
    await editor.session_update(
        session_id, update_tool_call(entry, status="completed" if trusted else "failed")
    )
    if not trusted:
        return False
    try:
        # The content shown is the content trusted: a file changed since is not.
        await asyncio.to_thread(trust.trust, path, env, digest)
    except OSError as exc:
        log.warning("cannot trust %s: %s", path, exc)
        return False
    return True


def _to_ask(path: str, env: Mapping[str, str], asked: set[str]) -> str | None:
    """The key of `path` when it is an untrusted config not asked about yet (one that
    links outside the workspace is never used, so never offered)."""
    real = trust.key(path)
    if real in asked or not os.path.isfile(path) or trust.outside(path) is not None:
        return None
    return None if trust.is_trusted(path, env) else real
