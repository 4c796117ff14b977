"""The bridge's slash commands: announced to the editor, run instead of a model turn.

After `session/new`, `load` and `resume` the editor gets `available_commands_update`
with these; a prompt whose text starts with `/NAME` of one of them runs it and answers
`end_turn` with what it did as an agent message. Any other `/text` goes to the model.
`/compact` and `/undo` are the daemon's `conversation/compact` and `turn/undo`; a daemon
without them answers "method not found", shown as such.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from acp import RequestError, update_agent_message_text
from acp.schema import (
    AvailableCommand,
    AvailableCommandInput,
    AvailableCommandsUpdate,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    UnstructuredCommandInput,
)

from jpcli.acp.config_options import MODES, Choices
from jpcli.acp.link import LinkClosed, LinkError
from jpcli.rpc import METHOD_NOT_FOUND


class CommandSession(Protocol):
    """What a command needs of its session."""

    session_id: str
    exists: bool
    choices: Choices

    async def send(self, updates: list[Any]) -> None: ...

    async def daemon_request(self, method: str, params: dict[str, Any]) -> Any: ...


@dataclass(frozen=True)
class Command:
    name: str
    description: str
    hint: str | None
    run: Callable[[CommandSession, str], Awaitable[str]]


class CommandFailed(Exception):
    """The command could not run; the message says why (shown to the user)."""


async def _call(session: CommandSession, method: str, params: dict[str, Any], what: str) -> Any:
    try:
        return await session.daemon_request(method, params)
    except LinkError as exc:
        if exc.code == METHOD_NOT_FOUND:
            raise CommandFailed(
                f"{what} is not available: this jpd has no `{method}` method (update jpd)."
            ) from None
        raise CommandFailed(f"{what} failed: {exc.message}") from None
    except LinkClosed as exc:
        raise CommandFailed(f"{what} failed: {exc}") from None


async def _compact(session: CommandSession, rest: str) -> str:
    if not session.exists:
        return "Nothing to compact yet: the conversation has no messages."
    params: dict[str, Any] = {"conversationId": session.session_id}
    if rest:
        params["instructions"] = rest
    await _call(session, "conversation/compact", params, "/compact")
    return "Compacted the conversation."


async def _undo(session: CommandSession, rest: str) -> str:
    if rest:
        raise CommandFailed(
            "/undo takes no arguments (it undoes the latest turn that changed files)."
        )
    if not session.exists:
        return "Nothing to undo: the conversation has no turns."
    # Without a turn id the daemon takes the latest turn that changed files.
    done = await _call(session, "turn/undo", {"conversationId": session.session_id}, "/undo")
    turn = (done or {}).get("turnId", "?") if isinstance(done, dict) else "?"
    return f"Undid turn {turn}."


async def _mode(session: CommandSession, rest: str) -> str:
    choices = session.choices
    if not rest:
        listed = ", ".join(f"`{m}`" for m in MODES)
        return f"Mode: `{choices.mode}`. Modes: {listed}."
    try:
        choices.set_mode(rest)
    except RequestError as exc:
        raise CommandFailed(str(exc.args[0] if exc.args else exc)) from None
    await session.send(
        [
            CurrentModeUpdate(session_update="current_mode_update", current_mode_id=choices.mode),
            ConfigOptionUpdate(
                session_update="config_option_update", config_options=choices.options()
            ),
        ]
    )
    return f"Mode: `{choices.mode}` from the next prompt on."


async def _model(session: CommandSession, rest: str) -> str:
    choices = session.choices
    if not rest:
        listed = ", ".join(f"`{m.value}`" for m in choices.models) or "none usable"
        return f"Model: `{choices.current_model}`. Models: {listed}."
    try:
        choices.set("model", rest)
    except RequestError as exc:
        raise CommandFailed(str(exc.args[0] if exc.args else exc)) from None
    await session.send(
        [
            ConfigOptionUpdate(
                session_update="config_option_update", config_options=choices.options()
            )
        ]
    )
    return f"Model: `{choices.current_model}` from the next prompt on."


async def _help(session: CommandSession, rest: str) -> str:
    lines = [f"- `/{c.name}{' ' + c.hint if c.hint else ''}`: {c.description}" for c in COMMANDS]
    return "Commands:\n" + "\n".join(lines)


COMMANDS = (
    Command(
        "compact",
        "Summarize the conversation so far to free context",
        "[instructions]",
        _compact,
    ),
    Command("undo", "Undo the last turn (its messages and file edits)", None, _undo),
    Command("mode", "Show or set the permission mode", "[ask|accept-edits|auto|read-only]", _mode),
    Command("model", "Show or set the model", "[model]", _model),
    Command("help", "List these commands", None, _help),
)
_BY_NAME = {c.name: c for c in COMMANDS}


def available_commands() -> AvailableCommandsUpdate:
    """The `available_commands_update` sent after a session opens."""
    return AvailableCommandsUpdate(
        session_update="available_commands_update",
        available_commands=[
            AvailableCommand(
                name=c.name,
                description=c.description,
                input=AvailableCommandInput(root=UnstructuredCommandInput(hint=c.hint))
                if c.hint
                else None,
            )
            for c in COMMANDS
        ],
    )


def parse(text: str) -> tuple[Command, str] | None:
    """The command a prompt's text starts with, and its argument text; None: a message."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    name, _, rest = stripped[1:].partition(" ")
    command = _BY_NAME.get(name.strip())
    return (command, rest.strip()) if command is not None else None


async def run(session: CommandSession, command: Command, rest: str) -> None:
    """Run `command` and show its outcome (or why it failed) as an agent message."""
    try:
        said = await command.run(session, rest)
    except CommandFailed as exc:
        said = str(exc)
    await session.send([update_agent_message_text(said)])
