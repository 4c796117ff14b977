"""`jp conversation fork|grep|label|title|archive|unarchive|pin|unpin` and `ls` with its
options, through the daemon's `conversation/fork`, `conversation/grep`,
`conversation/update` and `conversation/list` (protocol.md 5.11, 5.26-5.27)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

from jpcli.conversations.basic import ConversationChoiceError, not_found, pick_conversation
from jpcli.follow import EXIT_ERROR, EXIT_OK
from jpcli.rpc import Connection, RpcError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jpcli.current import CurrentConversations

EXIT_NO_MATCH = 1


def target(
    connection: Connection, prefix: str | None, current: CurrentConversations, err: TextIO
) -> str | None:
    """The conversation `prefix` names, else this workspace's; None (said why) if none."""
    chosen = prefix or current.get()
    if not chosen:
        err.write("jp: no conversation in this workspace yet; name one: jp conversation ls\n")
        return None
    try:
        return pick_conversation(connection, chosen)
    except ConversationChoiceError as exc:
        err.write(f"jp: {exc}\n")
        return None


def when(text: str) -> str:
    """`--from/--until`: a duration ago (`2h`, `1d`) or an ISO 8601 time, as ISO UTC."""
    from jpcli.conversations.cli import duration

    try:
        moment = datetime.now(UTC) - timedelta(seconds=duration(text))
    except argparse.ArgumentTypeError:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f"expected a time like 2h, 1d or 2026-11-27T10:00, got {text!r}"
            ) from None
        if moment.tzinfo is None:
            moment = moment.astimezone()  # a local time, as a user means it
    return moment.astimezone(UTC).isoformat()


def fork(
    connection: Connection,
    source: str,
    *,
    first: int | None = None,
    last: int | None = None,
    from_time: str | None = None,
    until: str | None = None,
    title: str | None = None,
    labels: list[str] | None = None,
) -> dict[str, Any]:
    """`conversation/fork` of `source`; returns its result (raises `RpcError`)."""
    params: dict[str, Any] = {"conversationId": source}
    for key, value in (
        ("first", first),
        ("last", last),
        ("from", from_time),
        ("until", until),
        ("title", title),
    ):
        if value is not None:
            params[key] = value
    if labels:
        params["labels"] = labels
    result: dict[str, Any] = connection.request("conversation/fork", params)
    return result


def run(
    connection: Connection,
    args: argparse.Namespace,
    *,
    out: TextIO,
    err: TextIO,
    current: CurrentConversations,
) -> int:
    """Run one of the organising `jp conversation` actions."""
    action = args.action
    if action == "grep":
        return _grep(connection, args, out=out, err=err)
    prefix = getattr(args, "id", None) or getattr(args, "conversation", None)
    target_id = target(connection, prefix, current, err)
    if target_id is None:
        return EXIT_ERROR
    try:
        if action == "fork":
            return _fork(connection, target_id, args, out=out, current=current)
        update: dict[str, Any] = {"conversationId": target_id}
        if action == "label":
            key = "addLabels" if args.label_action == "add" else "removeLabels"
            update[key] = args.labels
        elif action == "title":
            update["title"] = " ".join(args.text)
        elif action in ("archive", "unarchive"):
            update["archived"] = action == "archive"
        else:
            update["pinned"] = action == "pin"
        result = connection.request("conversation/update", update)
    except RpcError as exc:
        return not_found(exc, target_id, err)
    except ValueError as exc:
        err.write(f"jp: {exc}\n")
        return EXIT_ERROR
    conversation = result.get("conversation") or {}
    labels = ", ".join(conversation.get("labels") or []) or "none"
    out.write(f"{target_id}: {conversation.get('title') or '(no title)'}  [labels: {labels}]\n")
    return EXIT_OK


def _fork(
    connection: Connection,
    source: str,
    args: argparse.Namespace,
    *,
    out: TextIO,
    current: CurrentConversations,
) -> int:
    result = fork(
        connection,
        source,
        first=args.first,
        last=args.last,
        from_time=when(args.from_time) if args.from_time else None,
        until=when(args.until) if args.until else None,
        title=args.title,
        labels=args.labels,
    )
    new = str(result.get("conversationId"))
    if not args.no_use:
        current.set(new)
    out.write(f"{new}  (forked from {source}, {result.get('turns', 0)} turns)\n")
    return EXIT_OK


def _grep(connection: Connection, args: argparse.Namespace, *, out: TextIO, err: TextIO) -> int:
    # Smart case, as ripgrep and JP: a pattern without capitals ignores case.
    ignore = args.ignore_case or (not args.case_sensitive and args.pattern == args.pattern.lower())
    params: dict[str, Any] = {
        "pattern": args.pattern,
        "ignoreCase": ignore,
        "context": max(0, min(args.context, 20)),
        "archived": args.archived,
    }
    if args.labels:
        params["labels"] = args.labels
    if args.conversation:
        try:
            params["conversationId"] = pick_conversation(connection, args.conversation)
        except ConversationChoiceError as exc:
            err.write(f"jp: {exc}\n")
            return EXIT_ERROR
    try:
        result = connection.request("conversation/grep", params)
    except RpcError as exc:
        err.write(f"jp: {exc.message}\n")
        return EXIT_ERROR
    matches = [m for m in result.get("matches") or [] if isinstance(m, dict)]
    if args.format == "json":
        out.write(json.dumps(result, ensure_ascii=False) + "\n")
    else:
        for match in matches:
            where = f"{match.get('conversationId')}:{match.get('event')}:{match.get('role')}"
            for line in match.get("before") or []:
                out.write(f"{where}- {line}\n")
            out.write(f"{where}: {match.get('line')}\n")
            for line in match.get("after") or []:
                out.write(f"{where}- {line}\n")
    if result.get("truncated"):
        err.write("jp: more lines matched; showing the first ones (narrow the pattern)\n")
    return EXIT_OK if matches else EXIT_NO_MATCH


def list_params(args: argparse.Namespace) -> dict[str, Any]:
    """`conversation/list` params of `jp conversation ls`'s options."""
    params: dict[str, Any] = {"sort": args.sort}
    if args.archived:
        params["archived"] = "only"
    elif args.all:
        params["archived"] = "include"
    if args.descending is not None:
        params["descending"] = args.descending
    if args.limit:
        params["limit"] = args.limit
    if args.labels:
        params["labels"] = args.labels
    return params


def decorated(conversation: dict[str, Any]) -> dict[str, Any]:
    """`conversation` with its pin, archive and labels shown in its title for `ls`."""
    marks = []
    if conversation.get("pinned"):
        marks.append("[pinned]")
    if conversation.get("archived"):
        marks.append("[archived]")
    marks += [f"#{label}" for label in conversation.get("labels") or []]
    title = " ".join([str(conversation.get("title") or ""), *marks]).strip()
    return {**conversation, "title": title}
