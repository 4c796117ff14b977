"""`jp chat`: a read-eval-print loop on one conversation.

Each message is one turn run exactly as `jp query` runs it (same renderer, same
prompts for questions and permissions); the REPL only keeps the conversation, the
model and the tool toggles between turns. prompt_toolkit is imported here only, so
`jp --help` and `jp query` never load it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from jpcli.commands import Output, attach, query
from jpcli.conversations.basic import conversation_compact
from jpcli.follow import EXIT_CANCELLED, EXIT_ERROR, EXIT_OK
from jpcli.parser import PERMISSION_MODES
from jpcli.rpc import Connection

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jpcli.current import CurrentConversations
    from jpcli.prompter import TerminalPrompter

HELP = """\
Enter sends the message; Esc then Enter (or a line ending in \\) starts a new line.
Ctrl-C cancels the running turn (at the prompt: clears the line); Ctrl-D leaves.
  /new                  the next message starts a new conversation
  /model NAME           use model NAME (<provider>/<model> or an alias) from now on
  /model                back to the configured model
  /mode [MODE]          permission mode from now on: ask, accept-edits, auto, read-only
                        (bare: show it)
  /tools on|off [NAME]  enable / disable tool NAME (all tools without NAME) from now on
  /attach               re-attach to this conversation's running turn
  /undo [TURN]          put back the files the latest turn that changed files (or TURN) changed
  /compact [FOCUS]      fold the older part of this conversation into a summary now
  /help                 this help
"""


@dataclass
class ChatState:
    """What the REPL carries from one turn to the next."""

    conversation: str | None = None
    new: bool = False
    model: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    mode: str | None = None
    config_files: list[str] = field(default_factory=list)
    """`--cfg`: laid over the config of every turn of the chat."""
    attachments: list[str] = field(default_factory=list)
    """`-a`: sent with the first message only."""

    def extra(self) -> dict[str, Any]:
        """The next turn's `configFiles` and `attachments` params."""
        params: dict[str, Any] = {}
        if self.config_files:
            params["configFiles"] = list(self.config_files)
        if self.attachments:
            params["attachments"] = list(self.attachments)
        return params


def slash_command(line: str, state: ChatState, write: Callable[[str], object]) -> bool:
    """Apply a `/command` to `state`; False when `line` is a message, not a command.

    `/attach`, `/undo` and `/compact` are handled by the loop (they talk to the daemon); here they
    are recognised only.
    """
    words = line.split()
    if not words or not words[0].startswith("/") or line.startswith("//"):
        return False
    name, rest = words[0], words[1:]
    if name == "/new" and not rest:
        state.conversation, state.new = None, True
        write("jp: the next message starts a new conversation\n")
    elif name == "/model" and len(rest) <= 1:
        state.model = rest[0] if rest else None
        write(f"jp: model: {state.model or 'the configured default'}\n")
    elif name == "/mode" and len(rest) <= 1:
        if rest and rest[0] not in PERMISSION_MODES:
            write(f"jp: unknown mode {rest[0]!r}; modes: {', '.join(PERMISSION_MODES)}\n")
        else:
            state.mode = rest[0] if rest else state.mode
            write(f"jp: mode: {state.mode or 'ask'}\n")
    elif name == "/tools" and rest and rest[0] in ("on", "off") and len(rest) <= 2:
        toggle: dict[str, Any] = {"enable": rest[0] == "on"}
        if len(rest) == 2:
            toggle["name"] = rest[1]
        state.tools.append(toggle)
        write(f"jp: tool {rest[1] if len(rest) == 2 else 'all tools'} {rest[0]} from now on\n")
    elif name == "/help" and not rest:
        write(HELP)
    elif name == "/undo" and len(rest) <= 1:
        pass
    elif name != "/compact" and (name != "/attach" or rest):
        write(f"jp: unknown command or arguments: {line.strip()} (see /help)\n")
    return True


def history_file(env: Mapping[str, str]) -> str:
    """The REPL's input history: `chat_history` in jp's state dir."""
    from jpcli.current import state_dir

    return os.path.join(state_dir(env), "chat_history")


def _session(env: Mapping[str, str]) -> Any:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory
    from prompt_toolkit.key_binding import KeyBindings

    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _newline(event: Any) -> None:
        event.current_buffer.insert_text("\n")

    path = history_file(env)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    return PromptSession(history=FileHistory(path), key_bindings=bindings)


def _read_message(session: Any) -> str:
    """One message; a line ending in a backslash continues on the next line."""
    lines: list[str] = []
    prompt = "jp> "
    while True:
        line = str(session.prompt(prompt))
        if not line.endswith("\\"):
            lines.append(line)
            return "\n".join(lines)
        lines.append(line[:-1])
        prompt = "... "


def chat(
    connection: Connection,
    *,
    output: Output,
    prompter: TerminalPrompter | None,
    environment: Mapping[str, Any] | None,
    current: CurrentConversations,
    env: Mapping[str, str],
    model: str | None = None,
    new: bool = False,
    mode: str | None = None,
    config_files: list[str] | None = None,
    attachments: list[str] | None = None,
) -> int:
    """Run the REPL until Ctrl-D; continues this workspace's conversation unless `new`.

    Returns 0. Ctrl-C during a turn cancels it (no cancel/detach/resume choice: the
    prompt is the next thing shown either way).
    """
    session = _session(env)
    state = ChatState(
        new=new,
        model=model,
        conversation=None if new else current.get(),
        mode=mode,
        config_files=list(config_files or []),
        attachments=list(attachments or []),
    )
    # A chat's Ctrl-C always cancels: `can_prompt` off skips the one-key choice.
    turn_output = replace(output, can_prompt=False)
    err = output.err
    err.write("jp chat: /help for commands, Ctrl-D to leave\n")
    while True:
        try:
            message = _read_message(session)
        except KeyboardInterrupt:
            continue  # clears the line
        except EOFError:
            return EXIT_OK
        if not message.strip():
            continue
        if slash_command(message, state, err.write):
            words = message.split()
            if words[0] == "/undo" and len(words) <= 2:
                from jpcli.undo import turn_undo

                turn_undo(
                    connection,
                    words[1] if len(words) == 2 else None,
                    conversation=state.conversation,
                    out=err,
                    err=err,
                )
            if message.split()[0] == "/attach" and len(message.split()) == 1:
                if state.conversation is None:
                    err.write("jp: no conversation yet\n")
                else:
                    attach(
                        connection,
                        state.conversation,
                        output=turn_output,
                        prompter=prompter,
                        current=current,
                    )
            elif message.split()[0] == "/compact":
                if state.conversation is None:
                    err.write("jp: no conversation yet\n")
                else:
                    focus = message.strip()[len("/compact") :].strip() or None
                    conversation_compact(connection, state.conversation, focus, out=err, err=err)
            continue
        try:
            code = query(
                connection,
                message,
                new=state.new,
                conversation=state.conversation,
                model=state.model,
                tools=state.tools,
                mode=state.mode,
                output=turn_output,
                prompter=prompter,
                environment=environment,
                current=current,
                extra=state.extra(),
            )
        except KeyboardInterrupt:  # Ctrl-C twice: stop waiting for the cancellation
            code = EXIT_CANCELLED
        # They went with this message (and are in its log), or were refused with it (the
        # error named them): either way not sent again.
        state.attachments = []
        if code == EXIT_CANCELLED:
            err.write("jp: cancelled\n")
        # `query` made the turn's conversation this workspace's, unless a new
        # conversation's first turn failed: then the next message starts anew again.
        if code != EXIT_ERROR or state.conversation is not None:
            state.conversation, state.new = current.get(), False
