"""The `jp conversation` commands, and finding a conversation by a prefix of its id."""

from __future__ import annotations

import json
from typing import Any, TextIO

from jpcli.conversations.event_lines import (
    format_conversation_row,
    format_persisted_event,
    total_usage,
)
from jpcli.follow import EXIT_ERROR, EXIT_OK
from jpcli.render import format_compacted
from jpcli.rpc import Connection, RpcError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jpcli.current import CurrentConversations

NOT_FOUND = -32001


def conversation_ids(connection: Connection) -> list[str]:
    """Every conversation id, most recently updated first."""
    # Archived ones too: an id names a conversation wherever it is listed.
    result = connection.request("conversation/list", {"archived": "include"})
    conversations = result.get("conversations") if isinstance(result, dict) else None
    return [
        c["conversationId"]
        for c in conversations or []
        if isinstance(c, dict) and isinstance(c.get("conversationId"), str)
    ]


class ConversationChoiceError(Exception):
    """`--conversation` or `jp conversation use` named no conversation, or several."""


def pick_conversation(connection: Connection, prefix: str) -> str:
    """The conversation whose id is or starts with `prefix`."""
    from jpcli.current import Ambiguous, resolve_prefix

    try:
        found = resolve_prefix(prefix, conversation_ids(connection))
    except Ambiguous as exc:
        raise ConversationChoiceError(f"{exc}; give more of the id") from None
    if found is None:
        raise ConversationChoiceError(f"conversation not found: {prefix}")
    return found


def current_conversation(
    connection: Connection, current: CurrentConversations | None
) -> str | None:
    """This workspace's conversation when it still exists."""
    remembered = current.get() if current is not None else None
    if remembered is None:
        return None
    return remembered if remembered in conversation_ids(connection) else None


def not_found(exc: RpcError, conversation_id: str, err: TextIO) -> int:
    """Say why a request about `conversation_id` was refused; returns `EXIT_ERROR`."""
    if exc.code == NOT_FOUND:
        err.write(f"jp: conversation not found: {conversation_id}\n")
    else:
        err.write(f"jp: {exc.message}\n")
    return EXIT_ERROR


def conversation_list(
    connection: Connection,
    *,
    out: TextIO,
    as_json: bool = False,
    current: CurrentConversations | None = None,
    ids_only: bool = False,
    params: dict[str, Any] | None = None,
) -> int:
    """`jp conversation ls`: a header, then one line per conversation, newest first;
    `*` marks this workspace's current conversation. `ids_only`: the ids alone.
    `params`: which conversations, in what order (`conversation/list`)."""
    from jpcli.conversations.organize import decorated

    result = connection.request("conversation/list", params or {})
    conversations = [c for c in result.get("conversations") or [] if isinstance(c, dict)]
    if ids_only:
        out.writelines(f"{c.get('conversationId')}\n" for c in conversations)
        return EXIT_OK
    if as_json:
        out.write(json.dumps(result, ensure_ascii=False) + "\n")
        return EXIT_OK
    mine = current.get() if current is not None else None
    if conversations:
        out.write(format_conversation_row(None) + "\n")
    for conversation in conversations:
        mark = "*" if conversation.get("conversationId") == mine else " "
        out.write(mark + format_conversation_row(decorated(conversation))[1:] + "\n")
    return EXIT_OK


def _resolve(connection: Connection, prefix: str, err: TextIO) -> str | None:
    try:
        return pick_conversation(connection, prefix)
    except ConversationChoiceError as exc:
        err.write(f"jp: {exc}\n")
        return None


def conversation_show(
    connection: Connection, conversation_id: str, *, out: TextIO, err: TextIO, as_json: bool = False
) -> int:
    """`jp conversation show ID`: every persisted event, readably, then the token usage."""
    resolved = _resolve(connection, conversation_id, err)
    if resolved is None:
        return EXIT_ERROR
    try:
        result = connection.request("conversation/get", {"conversationId": resolved})
    except RpcError as exc:
        return not_found(exc, resolved, err)
    events = [e for e in result.get("events") or [] if isinstance(e, dict)]
    if as_json:
        out.write(json.dumps(result, ensure_ascii=False) + "\n")
        return EXIT_OK
    from jpcli.conversations.settings import kept_settings

    for line in kept_settings(events):
        out.write(line + "\n")
    for event in events:
        # Checkpoints are partial copies of output shown whole in its chat_response.
        if event.get("type") != "chat_checkpoint":
            out.write(format_persisted_event(event) + "\n")
    total = total_usage(events)
    if total:
        out.write(total + "\n")
    return EXIT_OK


def conversation_use(
    connection: Connection, prefix: str, *, out: TextIO, err: TextIO, current: CurrentConversations
) -> int:
    """`jp conversation use ID`: the conversation `jp query` continues in this workspace."""
    resolved = _resolve(connection, prefix, err)
    if resolved is None:
        return EXIT_ERROR
    current.set(resolved)
    out.write(f"{resolved} is now the conversation of {current.workspace}\n")
    return EXIT_OK


def conversation_remove(
    connection: Connection,
    conversation_id: str,
    *,
    err: TextIO,
    current: CurrentConversations | None = None,
) -> int:
    """`jp conversation rm ID`: delete a conversation."""
    resolved = _resolve(connection, conversation_id, err)
    if resolved is None:
        return EXIT_ERROR
    try:
        connection.request("conversation/delete", {"conversationId": resolved})
    except RpcError as exc:
        return not_found(exc, resolved, err)
    if current is not None and current.get() == resolved:
        current.set(None)
    return EXIT_OK


def conversation_compact(
    connection: Connection,
    conversation_id: str | None,
    instructions: str | None,
    *,
    out: TextIO,
    err: TextIO,
) -> int:
    """`jp conversation compact [ID]`: fold the older part into a summary now."""
    if not conversation_id:
        err.write("jp: no conversation in this workspace yet; name one: jp conversation ls\n")
        return EXIT_ERROR
    resolved = _resolve(connection, conversation_id, err)
    if resolved is None:
        return EXIT_ERROR
    params: dict[str, str] = {"conversationId": resolved}
    if instructions:
        params["instructions"] = instructions
    try:
        result: dict[str, Any] = connection.request("conversation/compact", params)
    except RpcError as exc:
        return not_found(exc, resolved, err)
    out.write(format_compacted(result) + "\n")
    return EXIT_OK
