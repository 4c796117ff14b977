"""`jp`: the thin command-line client of the `jpd` daemon.

Usage:
    jp [--stdio] query [--new] [-m MODEL] [-c KEY=VALUE]... [--detach]
                       [--non-interactive] [-F text|json] MESSAGE...
    jp attach [CONVERSATION] [--from-seq N] [--non-interactive] [-F text|json]
    jp turn ls [-F text|json]
    jp conversation ls | show ID | rm ID
    jp daemon status [-F text|json] | stop

`jp` talks to the shared daemon on its Unix socket (`$JP_SOCKET`, else
`<user runtime dir>/jp/jpd.sock`), starting `jpd --listen` in the background when no
daemon answers. Turns run in the daemon: closing `jp` does not stop them.

`jp query` continues the most recent conversation unless `--new` (or there is none)
and streams the answer to stdout (rendered as markdown on a colour terminal, plain
text otherwise or with `NO_COLOR`); tool calls, notes and reasoning (when stderr is a
terminal) go to stderr. Without MESSAGE arguments the message is read from stdin when
stdin is not a terminal. `--detach` starts the turn, prints `CONVERSATION TURN` and
returns at once. `--non-interactive` never prompts: the turn's questions follow the
`deny` detached policy, and Ctrl-C cancels. `-F json` prints each `turn/event` as one
JSON object per line on stdout.

Ctrl-C while a turn streams: on a terminal (stdin and stderr), a one-key choice:
[c]ancel the turn, [d]etach and leave it running, or [r]esume; without one, the turn
is cancelled (`turn/cancel`) and `jp` waits for its end. Another Ctrl-C quits at once.

`jp attach` re-attaches to a conversation (default: the one with a running turn, else
the most recent), shows the running turn from its start (or with `--from-seq N`,
every event after N), then streams it live until it completes.

`-c KEY=VALUE` (repeatable) overrides config for this turn: the key is split on dots
(a quoted segment may contain dots: `conversation.tools.'*'.detached=deny`), the value
is JSON when it parses as JSON, else a string; later options win.

Exit codes:
    0    success: the turn ended with `end_turn` or `max_tokens`, or was detached
         (`--detach`, or Ctrl-C then "detach"); any other command succeeded
    1    error: the turn ended with `error`, the daemon refused a request (e.g. a
         config error, an unknown conversation), or the daemon could not be started
         or reached
    2    usage error (bad arguments)
    3    `jp daemon status`: no daemon is running
    130  cancelled (Ctrl-C, or the turn was cancelled elsewhere)

Environment:
    JP_SOCKET    the daemon's socket (default: <user runtime dir>/jp/jpd.sock)
    JP_LOG_DIR   where the daemon logs (`jpd.log`); default: the user log dir
                 (~/.local/state/jp/log on Linux)
    JPD_COMMAND  run this command as a private daemon on stdio for this one `jp`
                 command (like `--stdio`), instead of using the shared daemon
    NO_COLOR     plain text output

Only the standard library is imported on the start-up path, so `jp` starts fast.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from clients.jp import __version__

# `typing` costs several milliseconds at start-up and is needed only by the type checker.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from clients.jp.commands import Output

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_RUNNING = 3
EXIT_CANCELLED = 130


def _format_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-F",
        "--format",
        choices=("text", "json"),
        default="text",
        help="output format (json: machine-readable, one object per line)",
    )


def _non_negative(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value!r}")
    return number


def build_parser() -> argparse.ArgumentParser:
    """The `jp` argument parser."""
    parser = argparse.ArgumentParser(
        prog="jp", description="Thin client of the jpd LLM agent daemon."
    )
    parser.add_argument("--version", action="version", version=f"jp {__version__}")
    parser.add_argument(
        "--stdio",
        action="store_true",
        help="use a private daemon on stdio for this command instead of the shared one",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    query = commands.add_parser("query", aliases=["q"], help="ask the assistant (one turn)")
    query.add_argument("--new", action="store_true", help="start a new conversation")
    query.add_argument("-m", "--model", help="model as <provider>/<model>")
    query.add_argument(
        "-c",
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override for this turn (repeatable; VALUE is JSON or a string)",
    )
    query.add_argument(
        "--detach", action="store_true", help="start the turn, print its ids and return"
    )
    query.add_argument(
        "--non-interactive",
        action="store_true",
        help="never prompt (questions follow the `deny` detached policy)",
    )
    _format_option(query)
    query.add_argument("message", nargs="*", metavar="MESSAGE", help="the message (joined)")

    attach = commands.add_parser("attach", help="re-attach to a conversation's running turn")
    attach.add_argument("conversation", nargs="?", metavar="CONVERSATION")
    attach.add_argument(
        "--from-seq",
        type=_non_negative,
        metavar="N",
        help="replay every event after sequence number N first",
    )
    attach.add_argument("--non-interactive", action="store_true", help="never prompt")
    _format_option(attach)

    turn = commands.add_parser("turn", help="running turns")
    turn_actions = turn.add_subparsers(dest="action", metavar="ACTION")
    turn_ls = turn_actions.add_parser("ls", aliases=["list"], help="running turns and questions")
    _format_option(turn_ls)

    conversation = commands.add_parser(
        "conversation", aliases=["c"], help="list, show or remove conversations"
    )
    actions = conversation.add_subparsers(dest="action", metavar="ACTION")
    actions.add_parser("ls", aliases=["list"], help="list conversations, newest first")
    show = actions.add_parser("show", help="print a conversation's events")
    show.add_argument("id", metavar="ID")
    remove = actions.add_parser("rm", aliases=["delete"], help="delete a conversation")
    remove.add_argument("id", metavar="ID")

    daemon = commands.add_parser("daemon", help="the shared daemon: status, stop")
    daemon_actions = daemon.add_subparsers(dest="action", metavar="ACTION")
    status = daemon_actions.add_parser("status", help="pid, uptime, clients, running turns")
    _format_option(status)
    daemon_actions.add_parser("stop", help="cancel running turns (recorded) and stop the daemon")
    return parser


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _query_inputs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Any]:
    """Validate the query arguments (usage errors exit 2 through `parser.error`)."""
    from clients.jp.overrides import parse_config_overrides

    message = " ".join(args.message)
    if not args.message and not _isatty(sys.stdin):
        message = sys.stdin.read()
    if not message.strip():
        parser.error("query: a MESSAGE is required")
    if args.detach and _private(args):
        parser.error("query: --detach needs the shared daemon (not --stdio or JPD_COMMAND)")
    try:
        config = parse_config_overrides(args.config)
    except ValueError as exc:
        parser.error(f"-c: {exc}")
    return {
        "message": message,
        "new": args.new,
        "model": args.model,
        "config": config,
        "detach": args.detach,
        "non_interactive": args.non_interactive,
    }


def _private(args: argparse.Namespace) -> bool:
    return bool(args.stdio or os.environ.get("JPD_COMMAND", "").strip())


def main(argv: list[str] | None = None) -> int:
    """Run `jp` with `argv` (default: `sys.argv[1:]`); returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        needs_action = ("conversation", "c", "turn", "daemon")
        if args.command is None or (args.command in needs_action and not args.action):
            parser.print_usage(sys.stderr)
            return EXIT_USAGE
        inputs = _query_inputs(parser, args) if args.command in ("query", "q") else {}
    except SystemExit as exc:  # argparse: --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    return _run(args, inputs)


def _output(args: argparse.Namespace) -> Output:
    from clients.jp.commands import Output

    out, err = sys.stdout, sys.stderr
    return Output(
        out,
        err,
        out_tty=_isatty(out),
        err_tty=_isatty(err),
        color=not os.environ.get("NO_COLOR"),
        json=getattr(args, "format", "text") == "json",
        can_prompt=_isatty(sys.stdin) and _isatty(err),
    )


def _dispatch(args: argparse.Namespace, inputs: dict[str, Any], daemon: Any) -> int:
    from clients.jp import admin, commands

    connection = daemon.start()
    output = _output(args)
    out, err = output.out, output.err
    command, action = args.command, getattr(args, "action", None)
    if command in ("query", "q"):
        return commands.query(connection, **inputs, output=output)
    if command == "attach":
        return commands.attach(
            connection,
            args.conversation,
            from_seq=args.from_seq,
            non_interactive=args.non_interactive,
            output=output,
        )
    if command == "turn":
        return admin.turn_list(connection, out=out, err=err, as_json=output.json)
    if command == "daemon" and action == "status":
        return admin.daemon_status(connection, out=out, as_json=output.json)
    if command == "daemon":
        wait = getattr(daemon, "wait_stopped", None)
        code = admin.daemon_stop(connection, out=out, err=err, wait_stopped=wait)
        daemon.close()
        return code
    if action in ("ls", "list"):
        return commands.conversation_list(connection, out=out)
    if action == "show":
        return commands.conversation_show(connection, args.id, out=out, err=err)
    return commands.conversation_remove(connection, args.id, err=err)


def _run(args: argparse.Namespace, inputs: dict[str, Any]) -> int:
    # Everything below is imported only once the arguments are known to be good.
    from clients.jp.daemon import DaemonError, NotRunning, SocketDaemon
    from clients.jp.rpc import ConnectionClosed, RpcError

    err = sys.stderr
    daemon: Any
    if _private(args):
        from clients.jp.stdio_daemon import StdioDaemon

        daemon = StdioDaemon(workspace_root=os.getcwd())
    else:
        from clients.jp.terminal import Spinner

        spinner = Spinner(err, enabled=_isatty(err))
        # `jp daemon ...` never starts a daemon just to ask about it or stop it.
        daemon = SocketDaemon(
            workspace_root=os.getcwd(),
            autostart=args.command != "daemon",
            progress=lambda done: spinner.clear() if done else spinner.tick("starting jpd"),
        )
    try:
        try:
            code = _dispatch(args, inputs, daemon)
        except ConnectionClosed:
            raise daemon.died() from None
        daemon.close()
        return code
    except KeyboardInterrupt:
        daemon.kill()
        return EXIT_CANCELLED
    except NotRunning as exc:
        if getattr(args, "action", None) == "stop":
            err.write("jp: jpd is not running\n")
            return EXIT_OK
        err.write(f"jp: {exc}\n")
        return EXIT_NOT_RUNNING
    except DaemonError as exc:
        err.write(f"jp: error: {exc}\n")
        daemon.kill()
        return EXIT_ERROR
    except RpcError as exc:
        err.write(f"jp: {exc.message}\n")
        daemon.close()
        return EXIT_ERROR
    except BrokenPipeError:
        # stdout closed early (e.g. `jp ... | head -1`): not worth a traceback. Point
        # stdout at /dev/null so the interpreter's final flush does not complain again.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        daemon.kill()
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
