"""The `jp` commands about turns and conversations, run against an initialized connection."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from jpcli.follow import (
    EXIT_CANCELLED,
    EXIT_ERROR,
    EXIT_OK,
    Follow,
    Follower,
    Interrupts,
    JsonLines,
    Renderer,
)
from jpcli.render import TurnRenderer, format_conversation_row, format_persisted_event
from jpcli.rpc import Connection, ConnectionClosed, Notification, RpcError
from jpcli.terminal import Spinner

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jpcli.prompter import TerminalPrompter

EXIT_USAGE = 2
NOT_FOUND = -32001


@dataclass(frozen=True)
class Output:
    """Where and how a command writes."""

    out: TextIO
    err: TextIO
    out_tty: bool = False
    err_tty: bool = False
    color: bool = True
    """False when `NO_COLOR` is set: plain text, no markdown rendering."""
    json: bool = False
    """`-F json`: machine-readable output on stdout."""
    can_prompt: bool = False
    """A person is at a terminal (stdin and stderr are terminals) and may be asked."""


def make_renderer(output: Output) -> Renderer:
    """Markdown (rich) when stdout is a colour terminal, else plain text."""
    if output.out_tty and output.color:
        try:
            from jpcli.markdown import MarkdownRenderer
        except ImportError:  # rich missing: plain text is still readable
            pass
        else:
            return MarkdownRenderer(output.out, output.err, err_tty=output.err_tty)
    return TurnRenderer(
        output.out, output.err, out_tty=output.out_tty, err_tty=output.err_tty, color=output.color
    )


def _follower(
    connection: Connection, follow: Follow, output: Output, interrupts: Interrupts
) -> Follower:
    if output.json:
        return Follower(
            connection,
            follow,
            json_lines=JsonLines(output.out, output.err),
            spinner=Spinner(output.err, enabled=False),
            interrupts=interrupts,
        )
    return Follower(
        connection,
        follow,
        renderer=make_renderer(output),
        spinner=Spinner(output.err, enabled=output.err_tty),
        interrupts=interrupts,
    )


def _run_follower(
    follower: Follower,
    backlog: list[Notification] | None = None,
    prompter: TerminalPrompter | None = None,
) -> int:
    if prompter is not None:
        prompter.conversation_id = follower.follow.conversation_id
        prompter.before_prompt = follower.pause
    try:
        return follower.run(backlog or [])
    except (ConnectionClosed, KeyboardInterrupt):
        # End the partial answer's line before the caller prints its one-line error.
        follower.abort()
        raise


def _latest_conversation(connection: Connection) -> str | None:
    result = connection.request("conversation/list", {})
    conversations = result.get("conversations") if isinstance(result, dict) else None
    if conversations:
        first = conversations[0]
        conversation_id = first.get("conversationId") if isinstance(first, dict) else None
        if isinstance(conversation_id, str):
            return conversation_id
    return None


def query(
    connection: Connection,
    message: str,
    *,
    new: bool = False,
    model: str | None = None,
    config: Mapping[str, Any] | None = None,
    tools: Sequence[Mapping[str, Any]] = (),
    detach: bool = False,
    non_interactive: bool = False,
    output: Output,
    prompter: TerminalPrompter | None = None,
    environment: Mapping[str, Any] | None = None,
) -> int:
    """Run one turn and stream it (or, with `detach`, start it and print its ids).

    Continues the most recent conversation unless `new`. `tools` are the per-turn
    toggles (`{enable, name?}`, in order). With a `prompter` (installed on the
    connection), the turn's questions and permission requests are asked on the
    terminal. Exit codes: 0 for `end_turn`/`max_tokens` (or detached), 1 for `error`
    or a refused `turn/start` (a refused toggle, say), 130 when cancelled. `RpcError`
    from other calls and `ConnectionClosed` propagate.
    """
    with Interrupts() as interrupts:
        conversation_id = None if new else _latest_conversation(connection)
        params: dict[str, Any] = {"message": message}
        if conversation_id is not None:
            params["conversationId"] = conversation_id
        if model is not None:
            params["model"] = model
        if config:
            params["config"] = dict(config)
        if tools:
            params["tools"] = [dict(toggle) for toggle in tools]
        if non_interactive:
            params["detached"] = "deny"
        if environment is not None:
            params["environment"] = dict(environment)
        if interrupts.requested:
            return EXIT_CANCELLED  # Ctrl-C before anything started: nothing to cancel
        try:
            started = connection.request("turn/start", params)
        except RpcError as exc:
            output.err.write(f"jp: {exc.message}\n")
            return EXIT_ERROR
        turn_id = started.get("turnId") if isinstance(started, dict) else None
        started_conversation = started.get("conversationId") if isinstance(started, dict) else None
        if not isinstance(turn_id, str) or not isinstance(started_conversation, str):
            output.err.write(f"jp: error: unexpected turn/start result: {started!r}\n")
            return EXIT_ERROR
        if detach:
            return _print_started(started_conversation, turn_id, output)
        follow = Follow(
            started_conversation, turn_id, can_prompt=output.can_prompt and not non_interactive
        )
        return _run_follower(_follower(connection, follow, output, interrupts), None, prompter)


def _print_started(conversation_id: str, turn_id: str, output: Output) -> int:
    if output.json:
        line = json.dumps({"conversationId": conversation_id, "turnId": turn_id})
        output.out.write(line + "\n")
    else:
        output.out.write(f"{conversation_id} {turn_id}\n")
        if output.err_tty:
            output.err.write(
                f"jp: the turn runs in jpd; follow it with: jp attach {conversation_id}\n"
            )
    output.out.flush()
    return EXIT_OK


def attach(
    connection: Connection,
    conversation_id: str | None = None,
    *,
    from_seq: int | None = None,
    non_interactive: bool = False,
    output: Output,
    prompter: TerminalPrompter | None = None,
) -> int:
    """Re-attach to a conversation: replay, then stream live until its turn completes.

    Default conversation: the one with the most recently started running turn, else
    the most recent one. Without `from_seq`, shows the running turn from its start
    (or, when none runs, the last turn the daemon still holds). With `from_seq`, shows
    every event after it, then the running turn live. Exit codes as for `query`.
    """
    with Interrupts() as interrupts:
        if conversation_id is None:
            conversation_id = _attach_target(connection, output.err)
            if conversation_id is None:
                output.err.write("jp: no conversation to attach to\n")
                return EXIT_ERROR
        params = {"conversationId": conversation_id, "fromSeq": from_seq or 0}
        try:
            result = connection.request("turn/attach", params)
        except RpcError as exc:
            return _not_found(exc, conversation_id, output.err)
        if prompter is not None:
            prompter.conversation_id = conversation_id
        # The replay is sent before the result, so it is all queued by now. Questions
        # waiting for an answer are asked once the replay is shown.
        backlog: list[Notification] = []
        while (note := connection.receive(timeout=0, hold_requests=True)) is not None:
            backlog.append(note)
        running = [
            t.get("turnId")
            for t in (result.get("runningTurns") or [] if isinstance(result, dict) else [])
            if isinstance(t, dict)
        ]
        turn_id = running[0] if running and isinstance(running[0], str) else None
        if turn_id is None and from_seq is None:
            turn_id = _last_turn(backlog, conversation_id)
            if turn_id is None:
                output.err.write(
                    f"jp: no turn is running in {conversation_id}; "
                    f"see: jp conversation show {conversation_id}\n"
                )
                return EXIT_OK
        follow = Follow(
            conversation_id,
            turn_id,
            all_turns=from_seq is not None,
            live=bool(running),
            can_prompt=output.can_prompt and not non_interactive,
        )
        return _run_follower(_follower(connection, follow, output, interrupts), backlog, prompter)


def _attach_target(connection: Connection, err: TextIO) -> str | None:
    result = connection.request("turn/list", {})
    turns = [t for t in (result.get("turns") or []) if isinstance(t, dict)]
    if turns:
        newest = turns[-1].get("conversationId")
        if len(turns) > 1:
            err.write(f"jp: {len(turns)} turns are running; attaching to the newest (jp turn ls)\n")
        if isinstance(newest, str):
            return newest
    return _latest_conversation(connection)


def _last_turn(backlog: list[Notification], conversation_id: str) -> str | None:
    for note in reversed(backlog):
        params = note.params
        if (
            note.method == "turn/event"
            and isinstance(params, dict)
            and params.get("conversationId") == conversation_id
            and isinstance(params.get("turnId"), str)
        ):
            turn_id: str = params["turnId"]
            return turn_id
    return None


def _not_found(exc: RpcError, conversation_id: str, err: TextIO) -> int:
    if exc.code == NOT_FOUND:
        err.write(f"jp: conversation not found: {conversation_id}\n")
    else:
        err.write(f"jp: {exc.message}\n")
    return EXIT_ERROR


def conversation_list(connection: Connection, *, out: TextIO) -> int:
    """`jp conversation ls`: one line per conversation, newest first."""
    result = connection.request("conversation/list", {})
    for conversation in result.get("conversations") or []:
        out.write(format_conversation_row(conversation) + "\n")
    return EXIT_OK


def conversation_show(
    connection: Connection, conversation_id: str, *, out: TextIO, err: TextIO
) -> int:
    """`jp conversation show ID`: every persisted event, readably."""
    try:
        result = connection.request("conversation/get", {"conversationId": conversation_id})
    except RpcError as exc:
        return _not_found(exc, conversation_id, err)
    for event in result.get("events") or []:
        if isinstance(event, dict):
            out.write(format_persisted_event(event) + "\n")
    return EXIT_OK


def conversation_remove(connection: Connection, conversation_id: str, *, err: TextIO) -> int:
    """`jp conversation rm ID`: delete a conversation."""
    try:
        connection.request("conversation/delete", {"conversationId": conversation_id})
    except RpcError as exc:
        return _not_found(exc, conversation_id, err)
    return EXIT_OK
