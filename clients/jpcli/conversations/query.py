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
) -> dict[str, Any] | int:
    """`inputs` for `commands.query`, forking first and composing the message in the
    editor when asked; an exit code (said why) when no turn is to start."""
    prepared = _forked(connection, dict(inputs), current, err)
    if isinstance(prepared, dict) and prepared.pop("compose", False):
        from jpcli.conversations.basic import current_conversation
        from jpcli.conversations.compose import composed_inputs

        shown = prepared.get("conversation")
        if shown is None and not prepared.get("new"):
            shown = current_conversation(connection, current)
        return composed_inputs(connection, prepared, shown, err)
    return prepared


def _forked(
    connection: Connection,
    inputs: dict[str, Any],
    current: CurrentConversations,
    err: TextIO,
) -> dict[str, Any] | int:
    from jpcli.conversations.basic import ConversationChoiceError, pick_conversation
    from jpcli.conversations.organize import fork

    turns = inputs.pop("fork", None)
    if turns is None:
        return inputs
    source = inputs.get("conversation") or current.get()
    if not source:
        err.write("jp: --fork: no conversation in this workspace yet\n")
        return 1
    try:
        source = pick_conversation(connection, source)
        result = fork(connection, source, last=None if turns < 0 else turns)
    except ConversationChoiceError as exc:
        err.write(f"jp: {exc}\n")
        return 1
    except RpcError as exc:
        err.write(f"jp: --fork: {exc.message}\n")
        return 1
    inputs["conversation"] = str(result.get("conversationId"))
    inputs["new"] = False
    return inputs
