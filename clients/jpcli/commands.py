"""The `jp` commands that run or show a turn (`query`, `attach`, `turn resume`), run against an
initialized connection."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from jpcli.conversations.basic import (
    ConversationChoiceError,
    current_conversation,
    not_found,
    pick_conversation,
)
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
from jpcli.render import TurnRenderer
from jpcli.rpc import Connection, ConnectionClosed, Notification, RpcError
from jpcli.terminal import Spinner

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jpcli.current import CurrentConversations
    from jpcli.prompter import TerminalPrompter

EXIT_USAGE = 2
EXIT_NOTHING_RUNNING = 4


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
    mode: str | None = None,
    images: Sequence[Mapping[str, str]] = (),
    output: Output,
    prompter: TerminalPrompter | None = None,
    environment: Mapping[str, Any] | None = None,
    conversation: str | None = None,
    current: CurrentConversations | None = None,
    extra: Mapping[str, Any] | None = None,
) -> int:
    """Run one turn and stream it (or, with `detach`, start it and print its ids).

    Continues `conversation` (an id or unique prefix), else unless `new` this
    workspace's current conversation (`current`), which becomes the one this turn used;
    a failed turn in a new conversation does not (and says so). `tools` are the per-turn
    toggles (`{enable, name?}`, in order). With a `prompter` (installed on the
    connection), the turn's questions and permission requests are asked on the
    terminal. Exit codes: 0 for `end_turn`/`max_tokens` (or detached), 1 for `error`
    or a refused `turn/start` (a refused toggle, say), 130 when cancelled. `RpcError`
    from other calls and `ConnectionClosed` propagate.
    """
    with Interrupts() as interrupts:
        try:
            if conversation is not None:
                conversation_id: str | None = pick_conversation(connection, conversation)
            else:
                conversation_id = None if new else current_conversation(connection, current)
        except ConversationChoiceError as exc:
            output.err.write(f"jp: {exc}\n")
            return EXIT_ERROR
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
        if mode is not None:
            params["mode"] = mode
        if images:
            params["images"] = [dict(image) for image in images]
        if environment is not None:
            params["environment"] = dict(environment)
        params.update(extra or {})  # labels, title, expiry, persist (jpcli.conversations)
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
        warnings = started.get("configWarnings")
        if warnings:  # its module (hashlib) loads only for what it shows
            from jpcli.configs.warnings import show_once

            show_once(warnings, os.environ, output.err)
        if detach:
            if current is not None:
                current.set(started_conversation)
            return _print_started(started_conversation, turn_id, output)
        follow = Follow(
            started_conversation,
            turn_id,
            can_prompt=output.can_prompt and not non_interactive,
            watch_questions=prompter is None,
        )
        try:
            code = _run_follower(_follower(connection, follow, output, interrupts), None, prompter)
        except KeyboardInterrupt:
            if current is not None:
                current.set(started_conversation)
            raise
        _remember(current, started_conversation, conversation_id, code, output)
        return code


def _remember(
    current: CurrentConversations | None,
    started: str,
    continued: str | None,
    code: int,
    output: Output,
) -> None:
    """Make `started` this workspace's conversation, unless its first turn failed."""
    if current is None:
        return
    if code == EXIT_ERROR and continued is None:
        previous = current.get()
        then = f"continues {previous}" if previous else "starts a new conversation"
        output.err.write(
            f"jp: the turn failed; the next `jp query` {then} "
            f"(continue this one with --conversation {started})\n"
        )
        return
    current.set(started)


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
    current: CurrentConversations | None = None,
) -> int:
    """Re-attach to a conversation: replay, then stream live until its turn completes.

    Default conversation: the one with the most recently started running turn. Without
    `from_seq`, shows the running turn from its start; with nothing running, says so
    and returns `EXIT_NOTHING_RUNNING`. With `from_seq` (default conversation: this
    workspace's current one), shows every event after it, then the running turn live.
    Exit codes as for `query`.
    """
    with Interrupts() as interrupts:
        try:
            if conversation_id is not None:
                conversation_id = pick_conversation(connection, conversation_id)
            else:
                conversation_id = _attach_target(connection, output.err, from_seq, current)
        except ConversationChoiceError as exc:
            output.err.write(f"jp: {exc}\n")
            return EXIT_ERROR
        if conversation_id is None:
            output.err.write("jp: no turn is running (jp turn ls); nothing to attach to\n")
            return EXIT_NOTHING_RUNNING
        params = {"conversationId": conversation_id, "fromSeq": from_seq or 0}
        try:
            result = connection.request("turn/attach", params)
        except RpcError as exc:
            return not_found(exc, conversation_id, output.err)
        if replay_gap(from_seq, result):
            output.err.write(
                f"jp: not every event after {from_seq} is kept for replay (the daemon "
                "restarted after a crash, or they are older than its replay buffer); "
                f"their record: jp conversation show {conversation_id}\n"
            )
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
            with contextlib.suppress(RpcError, ConnectionClosed):
                connection.request("turn/detach", {"conversationId": conversation_id})
            output.err.write(
                f"jp: no turn is running in {conversation_id}; "
                f"see: jp conversation show {conversation_id}\n"
            )
            return EXIT_NOTHING_RUNNING
        follow = Follow(
            conversation_id,
            turn_id,
            all_turns=from_seq is not None,
            live=bool(running),
            can_prompt=output.can_prompt and not non_interactive,
            watch_questions=prompter is None,
        )
        return _run_follower(_follower(connection, follow, output, interrupts), backlog, prompter)


def replay_gap(from_seq: int | None, result: Any) -> bool:
    """Whether `turn/attach` could not replay every event after `from_seq` (protocol.md
    7.2: the replay is exact when `oldestSeq <= fromSeq + 1`)."""
    if from_seq is None or not isinstance(result, dict):
        return False
    oldest = result.get("oldestSeq")
    return isinstance(oldest, int) and oldest > from_seq + 1


def resume(
    connection: Connection,
    conversation: str | None = None,
    *,
    non_interactive: bool = False,
    output: Output,
    prompter: TerminalPrompter | None = None,
    environment: Mapping[str, Any] | None = None,
) -> int:
    """`jp turn resume [CONVERSATION]`: continue an interrupted turn (protocol.md 5.21)
    and show it as `jp attach` does. CONVERSATION is an id or unique prefix; default: the
    most recent resumable turn. Exit 4 when there is none."""
    from jpcli.admin import resumable_turns

    with Interrupts() as interrupts:
        turns = resumable_turns(connection.request("turn/list", {}))
        if conversation is not None:
            turns = [t for t in turns if str(t.get("conversationId", "")).startswith(conversation)]
        if len(turns) > 1 and conversation is not None:
            output.err.write(f"jp: {conversation!r} matches {len(turns)} turns; give more of it\n")
            return EXIT_ERROR
        if not turns:
            where = f" in {conversation}" if conversation else ""
            output.err.write(f"jp: no resumable turn{where} (jp turn ls)\n")
            return EXIT_NOTHING_RUNNING
        chosen = turns[-1]
        params: dict[str, Any] = {
            "conversationId": chosen.get("conversationId"),
            "turnId": chosen.get("turnId"),
        }
        if environment is not None:
            params["environment"] = environment
        try:
            started = connection.request("turn/resume", params)
        except RpcError as exc:
            output.err.write(f"jp: {exc.message}\n")
            return EXIT_ERROR
        follow = Follow(
            str(started.get("conversationId")),
            str(started.get("turnId")),
            can_prompt=output.can_prompt and not non_interactive,
            watch_questions=prompter is None,
        )
        return _run_follower(_follower(connection, follow, output, interrupts), None, prompter)


def _attach_target(
    connection: Connection,
    err: TextIO,
    from_seq: int | None,
    current: CurrentConversations | None,
) -> str | None:
    from jpcli.admin import running_turns

    turns = running_turns(connection.request("turn/list", {}))
    if turns:
        newest = turns[-1].get("conversationId")
        if len(turns) > 1:
            err.write(f"jp: {len(turns)} turns are running; attaching to the newest (jp turn ls)\n")
        if isinstance(newest, str):
            return newest
    if from_seq is not None:  # a replay was asked for: this workspace's conversation
        return current_conversation(connection, current)
    return None
