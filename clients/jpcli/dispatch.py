"""Run a parsed `jp` command on its daemon connection: each command to its implementation."""

from __future__ import annotations

import argparse
import functools
import os
import sys

from jpcli.inputs import isatty

# `typing` costs several milliseconds at start-up and is needed only by the type checker.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from jpcli.commands import Output


def output_for(args: argparse.Namespace) -> Output:
    """Where and how the command writes: the standard streams, as `args` and the terminal say."""
    from jpcli.commands import Output

    out, err = sys.stdout, sys.stderr
    return Output(
        out,
        err,
        out_tty=isatty(out),
        err_tty=isatty(err),
        color=not os.environ.get("NO_COLOR"),
        json=getattr(args, "format", "text") == "json",
        can_prompt=isatty(sys.stdin) and isatty(err),
    )


def dispatch(args: argparse.Namespace, inputs: dict[str, Any], daemon: Any, prompter: Any) -> int:
    """Start `daemon`'s connection and run the command on it; returns the exit code."""
    daemon.launch()  # a private daemon boots while the command's modules load
    from jpcli import admin, commands
    from jpcli.conversations import basic as conversations
    from jpcli.current import CurrentConversations

    # What needs no answer from the daemon is made before the handshake waits for it
    # (a private daemon is still booting): not after, between its answer and the turn.
    output = output_for(args)
    out, err = output.out, output.err
    command, action = args.command, getattr(args, "action", None)
    current = CurrentConversations(os.environ)
    environment: dict[str, Any] = {}
    if command in ("query", "q", "chat"):
        from jpcli.environment import client_environment

        environment = client_environment()
    if command in ("query", "q"):
        from jpcli.conversations.query import prepare
    connection = daemon.start()
    remote = getattr(daemon, "remote", None)
    if remote is not None:  # remembered per remote machine and workspace, not locally
        current.data_dir, current.workspace = remote.state_key()
    if command in ("query", "q"):
        prepared = prepare(connection, inputs, current, err)
        if isinstance(prepared, int):
            return prepared
        run: Any = commands.query
        if "responseSchema" in prepared["extra"]:
            from jpcli.structured.schema import run_structured

            run = functools.partial(run_structured, commands.query)
        return int(
            run(
                connection,
                **prepared,
                output=output,
                prompter=prompter,
                environment=environment,
                current=current,
            )
        )
    if command == "chat":
        from jpcli.chat import chat

        return chat(
            connection,
            output=output,
            prompter=prompter,
            environment=environment,
            current=current,
            env=os.environ,
            model=args.model,
            new=args.new,
            mode=args.mode,
            config_files=args.cfg,
            attachments=args.attachments,
        )
    if command == "attach":
        return commands.attach(
            connection,
            args.conversation,
            from_seq=args.from_seq,
            non_interactive=args.non_interactive,
            output=output,
            prompter=prompter,
            current=current,
        )
    if command == "config":
        from jpcli.config_files import config_show
        from jpcli.environment import client_environment

        return config_show(
            connection,
            overrides=inputs["overrides"],
            config_files=inputs.get("cfg") or [],
            environment=client_environment(),
            out=out,
            err=err,
            as_json=output.json,
        )
    if command == "models":
        from jpcli.environment import client_environment

        return admin.model_list(
            connection, out=out, as_json=output.json, environment=client_environment()
        )
    if command == "turn" and action == "resume":
        from jpcli.environment import client_environment

        return commands.resume(
            connection,
            args.conversation,
            non_interactive=args.non_interactive,
            output=output,
            prompter=prompter,
            environment=client_environment(),
        )
    if command == "turn" and action == "undo":
        from jpcli.undo import turn_undo

        return turn_undo(
            connection,
            args.turn,
            conversation=args.conversation or current.get(),
            out=out,
            err=err,
        )
    if command == "turn" and action == "diff":
        from jpcli.turns.changes import turn_diff

        return turn_diff(
            connection,
            args.turn,
            conversation=args.conversation or current.get(),
            out=out,
            err=err,
            color=out.isatty() and not os.environ.get("NO_COLOR"),
        )
    if command == "turn" and action == "cancel":
        return admin.turn_cancel(
            connection, args.conversation, out=out, err=err, current=current.get()
        )
    if command == "turn":
        return admin.turn_list(connection, out=out, err=err, as_json=output.json)
    if command == "inquiry":
        from jpcli import inquiries

        if action == "answer":
            return inquiries.inquiry_answer(
                connection,
                args.id,
                args.value,
                remember=args.remember,
                out=out,
                err=err,
                stdin=sys.stdin,
                stdin_tty=isatty(sys.stdin),
            )
        return inquiries.inquiry_list(connection, out=out, err=err, as_json=output.json)
    if command == "daemon" and action == "status":
        return admin.daemon_status(connection, out=out, as_json=output.json)
    if command == "daemon":
        wait = getattr(daemon, "wait_stopped", None)
        code = admin.daemon_stop(connection, out=out, err=err, wait_stopped=wait)
        daemon.close()
        return code
    if command in ("attachment", "a"):
        from jpcli.attachments.commands import run as attachment_run

        return attachment_run(connection, args, out=out, err=err, current=current)
    from jpcli.conversations.cli import ORGANIZE_ACTIONS

    if action in ORGANIZE_ACTIONS:
        from jpcli.conversations import organize

        return organize.run(connection, args, out=out, err=err, current=current)
    if action in ("ls", "list"):
        from jpcli.conversations.organize import list_params

        return conversations.conversation_list(
            connection,
            out=out,
            as_json=output.json,
            current=current,
            ids_only=args.ids,
            params=list_params(args),
        )
    if action == "show":
        return conversations.conversation_show(
            connection, args.id, out=out, err=err, as_json=output.json
        )
    if action == "use":
        return conversations.conversation_use(
            connection, args.id, out=out, err=err, current=current
        )
    if action == "compact":
        return conversations.conversation_compact(
            connection, args.id or current.get(), args.instructions, out=out, err=err
        )
    return conversations.conversation_remove(connection, args.id, err=err, current=current)
