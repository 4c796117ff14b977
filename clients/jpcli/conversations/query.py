"""`jp query --fork[=N]`: the turn runs in a fork of the conversation it would have
continued (with N, of its last N turns only), which becomes this workspace's."""

from __future__ import annotations

from typing import Any, TextIO

from jpcli.rpc import Connection, RpcError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jpcli.current import CurrentConversations


def prepare(
    connection: Connection,
    inputs: dict[str, Any],
    current: CurrentConversations,
    err: TextIO,
) -> dict[str, Any] | None:
    """`inputs` for `commands.query`, forking first when asked; None (said why) when the
    fork failed."""
    from jpcli.conversations.basic import ConversationChoiceError, pick_conversation
    from jpcli.conversations.organize import fork

    inputs = dict(inputs)
    turns = inputs.pop("fork", None)
    if turns is None:
        return inputs
    source = inputs.get("conversation") or current.get()
    if not source:
        err.write("jp: --fork: no conversation in this workspace yet\n")
        return None
    try:
        source = pick_conversation(connection, source)
        result = fork(connection, source, last=None if turns < 0 else turns)
    except ConversationChoiceError as exc:
        err.write(f"jp: {exc}\n")
        return None
    except RpcError as exc:
        err.write(f"jp: --fork: {exc.message}\n")
        return None
    inputs["conversation"] = str(result.get("conversationId"))
    inputs["new"] = False
    return inputs
