"""`jp`: the thin command-line client of the `jpd` daemon.

Usage:
    jp query [--new] [-m MODEL] [-c KEY=VALUE]... MESSAGE...
    jp conversation ls
    jp conversation show ID
    jp conversation rm ID

`jp query` continues the most recent conversation unless `--new` (or there is none),
streams the answer to stdout and everything else (tool calls, notes, reasoning when
stderr is a terminal) to stderr. Ctrl-C cancels the running turn (`turn/cancel`) and
waits for it to end; a second Ctrl-C quits at once. Without MESSAGE arguments the
message is read from stdin when stdin is not a terminal.

`-c KEY=VALUE` (repeatable) overrides config for this turn: the key is split on dots
(a quoted segment may contain dots: `conversation.tools.'*'.detached=deny`), the value
is JSON when it parses as JSON, else a string; later options win.

Exit codes:
    0    success (a turn that ended with `end_turn` or `max_tokens`)
    1    error: the turn ended with `error`, the daemon refused a request (e.g. a
         config error, an unknown conversation), or the daemon could not be started
         or died unexpectedly
    2    usage error (bad arguments)
    130  cancelled (Ctrl-C, or the turn was cancelled elsewhere)

Environment:
    JPD_COMMAND  the command that starts the daemon (split like a shell would);
                 default: `<this python> -m jpd`
    JP_LOG_DIR   where the daemon's stderr is logged (`jpd.log`); default: a per-user
                 directory under the system temp dir

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

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_CANCELLED = 130


def build_parser() -> argparse.ArgumentParser:
    """The `jp` argument parser."""
    parser = argparse.ArgumentParser(
        prog="jp", description="Thin client of the jpd LLM agent daemon."
    )
    parser.add_argument("--version", action="version", version=f"jp {__version__}")
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
    query.add_argument("message", nargs="*", metavar="MESSAGE", help="the message (joined)")

    conversation = commands.add_parser(
        "conversation", aliases=["c"], help="list, show or remove conversations"
    )
    actions = conversation.add_subparsers(dest="action", metavar="ACTION")
    actions.add_parser("ls", aliases=["list"], help="list conversations, newest first")
    show = actions.add_parser("show", help="print a conversation's events")
    show.add_argument("id", metavar="ID")
    remove = actions.add_parser("rm", aliases=["delete"], help="delete a conversation")
    remove.add_argument("id", metavar="ID")
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
    try:
        config = parse_config_overrides(args.config)
    except ValueError as exc:
        parser.error(f"-c: {exc}")
    return {"message": message, "new": args.new, "model": args.model, "config": config}


def main(argv: list[str] | None = None) -> int:
    """Run `jp` with `argv` (default: `sys.argv[1:]`); returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None or (args.command in ("conversation", "c") and not args.action):
            parser.print_usage(sys.stderr)
            return EXIT_USAGE
        inputs = _query_inputs(parser, args) if args.command in ("query", "q") else {}
    except SystemExit as exc:  # argparse: --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    return _run(args, inputs)


def _run(args: argparse.Namespace, inputs: dict[str, Any]) -> int:
    # Everything below is imported only once the arguments are known to be good.
    from clients.jp import commands
    from clients.jp.daemon import Daemon, DaemonError
    from clients.jp.rpc import ConnectionClosed, RpcError

    out, err = sys.stdout, sys.stderr
    daemon = Daemon(workspace_root=os.getcwd())
    try:
        try:
            connection = daemon.start()
            if args.command in ("query", "q"):
                code = commands.query(
                    connection, **inputs, out=out, err=err,
                    out_tty=_isatty(out), err_tty=_isatty(err),
                )  # fmt: skip
            elif args.action in ("ls", "list"):
                code = commands.conversation_list(connection, out=out)
            elif args.action == "show":
                code = commands.conversation_show(connection, args.id, out=out, err=err)
            else:
                code = commands.conversation_remove(connection, args.id, err=err)
        except ConnectionClosed:
            raise daemon.died() from None
        daemon.close()
        return code
    except KeyboardInterrupt:
        daemon.kill()
        return EXIT_CANCELLED
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
