"""`jp query` with no message on a terminal: the message is written in `$VISUAL` or
`$EDITOR` (else `vi`), below the conversation's recent exchange as `#` comments (JP's
editor flow). Comment lines are dropped; an empty message sends nothing."""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Mapping
from typing import Any

from jpcli.rpc import Connection, RpcError

RECENT = 6  # messages of the conversation shown
MARK = "# "
HEADER = (
    "# Write your message above. Lines starting with # are ignored;\n"
    "# an empty message sends nothing.\n"
)


def editor_command(env: Mapping[str, str]) -> list[str]:
    return shlex.split(env.get("VISUAL") or env.get("EDITOR") or "vi")


def recent_exchange(connection: Connection, conversation_id: str | None) -> list[str]:
    """The last `RECENT` user and assistant messages, as comment lines."""
    if conversation_id is None:
        return []
    try:
        result = connection.request("conversation/get", {"conversationId": conversation_id})
    except RpcError:
        return []
    messages: list[tuple[str, str]] = []
    for event in result.get("events") or []:
        if event.get("type") == "chat_request":
            messages.append(("you", str(event.get("content") or "")))
        elif event.get("type") == "chat_response" and event.get("message"):
            messages.append(("assistant", str(event["message"])))
    lines = [f"# conversation {conversation_id}", "#"]
    for who, text in messages[-RECENT:]:
        lines.append(f"# {who}:")
        lines += [(MARK + line).rstrip() for line in text.splitlines()]
        lines.append("#")
    return lines


def message_of(text: str) -> str:
    kept = [line for line in text.splitlines() if not line.startswith("#")]
    return "\n".join(kept).strip()


def compose(
    connection: Connection, conversation_id: str | None, env: Mapping[str, str]
) -> str | None:
    """The message written in the editor ("" when left empty); None when the editor
    could not run or failed (said on stderr by the caller)."""
    fd, path = tempfile.mkstemp(prefix="jp-message-", suffix=".md")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write("\n\n" + HEADER)
            handle.writelines(line + "\n" for line in recent_exchange(connection, conversation_id))
        try:
            done = subprocess.run([*editor_command(env), path], check=False)
        except OSError:
            return None
        if done.returncode != 0:
            return None
        with open(path, encoding="utf-8") as handle:
            return message_of(handle.read())
    finally:
        os.unlink(path)


def composed_inputs(
    connection: Connection, inputs: dict[str, Any], conversation_id: str | None, err: Any
) -> dict[str, Any] | int:
    """`inputs` with the message written in the editor; an exit code when none is sent."""
    message = compose(connection, conversation_id, os.environ)
    if message is None:
        err.write(
            f"jp: the editor ({shlex.join(editor_command(os.environ))}) failed; nothing sent\n"
        )
        return 1
    if not message:
        err.write("jp: empty message; nothing sent\n")
        return 0
    return {**inputs, "message": message}
