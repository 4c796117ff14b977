"""`jp turn undo [TURN]` and `/undo` in `jp chat`: put back the files a turn changed
(`turn/undo`, protocol.md 5.23)."""

from __future__ import annotations

from typing import Any, TextIO

from jpcli.rpc import Connection, RpcError

EXIT_OK = 0
EXIT_ERROR = 1


def undo_report(result: Any) -> str:
    """What `turn/undo` did, one file a line."""
    if not isinstance(result, dict):
        return "jp: undone\n"
    lines = [f"undid turn {result.get('turnId')}"]
    lines += [f"  restored {path}" for path in result.get("restored") or []]
    lines += [f"  removed  {path}" for path in result.get("removed") or []]
    return "\n".join(lines) + "\n"


def turn_undo(
    connection: Connection,
    turn: str | None,
    *,
    conversation: str | None,
    out: TextIO,
    err: TextIO,
) -> int:
    """Undo `turn` (default: the conversation's last turn) of `conversation` (default:
    this workspace's). A file changed since the turn is named and nothing is undone."""
    if conversation is None:
        err.write("jp: no conversation in this workspace yet; name one with --conversation\n")
        return EXIT_ERROR
    params: dict[str, Any] = {"conversationId": conversation}
    if turn:
        params["turnId"] = turn
    try:
        result = connection.request("turn/undo", params)
    except RpcError as exc:
        err.write(f"jp: cannot undo: {exc.message}\n")
        return EXIT_ERROR
    out.write(undo_report(result))
    return EXIT_OK
