"""`jp attachment add|ls|rm`: a conversation's attachments, kept by the daemon
(`conversation/update` `addAttachments`/`removeAttachments`); every later turn sends
their current content."""

from __future__ import annotations

import argparse
from typing import TextIO

from jpcli.conversations.organize import target
from jpcli.rpc import Connection, RpcError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jpcli.current import CurrentConversations

EXIT_OK, EXIT_ERROR = 0, 1


def run(
    connection: Connection,
    args: argparse.Namespace,
    *,
    out: TextIO,
    err: TextIO,
    current: CurrentConversations,
) -> int:
    conversation_id = target(connection, args.conversation, current, err)
    if conversation_id is None:
        return EXIT_ERROR
    params: dict[str, object] = {"conversationId": conversation_id}
    if args.action == "add":
        from jpcli.environment import client_environment

        params["addAttachments"] = args.specs
        params["environment"] = client_environment()  # the daemon reads them once to check
    elif args.action == "rm":
        params["removeAttachments"] = args.specs
    try:
        result = connection.request("conversation/update", params)
    except RpcError as exc:
        err.write(f"jp: {exc.message}\n")
        return EXIT_ERROR
    kept = (result.get("conversation") or {}).get("attachments") or []
    if args.action == "rm":
        missing = [spec for spec in args.specs if spec in kept]
        if missing:
            err.write(f"jp: still attached: {', '.join(missing)}\n")
    out.writelines(f"{spec}\n" for spec in kept)
    return EXIT_OK
