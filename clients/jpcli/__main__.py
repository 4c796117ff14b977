"""`jp`: the thin command-line client of the `jpd` daemon.

Usage:
    jp [--stdio] query [--new | --conversation ID] [-m MODEL] [-s TEXT] [-c KEY=VALUE]...
                       [-t [NAME]]... [-T [NAME]]... [--detach] [--non-interactive]
                       [-F text|json] MESSAGE...
    jp [chat [--new] [-m MODEL]]
    jp attach [CONVERSATION] [--from-seq N] [--non-interactive] [-F text|json]
    jp turn ls [-F text|json] | cancel [CONVERSATION] | resume [CONVERSATION]
    jp inquiry ls [-F text|json] | answer [--remember] ID [VALUE]
    jp conversation ls | show ID | use ID | rm ID
    jp daemon status [-F text|json] | stop
    jp models [-F text|json]
    jp completion bash|zsh|fish
    jp config path | init [--force] | show [-c KEY=VALUE]... [-F text|json]
    jp acp

`jp` talks to the shared daemon on its Unix socket (`$JP_SOCKET`, else
`<user runtime dir>/jp/jpd.sock`, or `jpd-<hash>.sock` for a `$JP_DATA_DIR` of its own),
starting `jpd --listen` in the background when no daemon answers. Turns run in the
daemon: closing `jp` does not stop them. Each turn runs with this shell's working
directory and environment (`JP_CONFIG`, API keys, the tools' environment), sent with
the request and used for that turn only.

`jp query` continues this workspace's conversation (the nearest directory up with
`.jp`, `.git` or `.hg`, else the current one; `jp conversation use ID` sets it), or
`--conversation ID` (any unique prefix); `--new`, or a workspace without one, starts a
new conversation. A failed first turn does not become the workspace's conversation
(`jp` says so). The answer streams to stdout (markdown on a colour terminal, plain text
otherwise or with `NO_COLOR`); tool calls and their ends (duration, first line; errors
in full), notes, reasoning and token usage (when stderr is a terminal) go to stderr.
Without MESSAGE arguments the message is read from stdin when it is not a terminal;
with them, piped stdin is sent after the message, marked `<stdin>...</stdin>` (at most
1 MiB, or `$JP_STDIN_LIMIT` bytes: more is an error). `--detach` starts the turn,
prints `CONVERSATION TURN` and returns at once. `--non-interactive` never prompts: the
turn's questions follow the `deny` detached policy, and Ctrl-C cancels. `-F json`
prints each `turn/event` as one JSON object per line on stdout.

Ctrl-C while a turn streams: on a terminal (stdin and stderr), a one-key choice:
[c]ancel the turn, [d]etach and leave it running, or [r]esume (the answer goes on where
it was); without one, the turn is cancelled (`turn/cancel`) and `jp` waits for its end.
Ctrl-C at the choice quits: the turn is cancelled and `jp` waits up to 5 s for its end
to be recorded; another Ctrl-C leaves at once. `jp turn cancel` cancels from elsewhere.

`jp chat` (also plain `jp` on a terminal) is a REPL on this workspace's conversation:
each message is a turn shown as by `jp query` (questions asked the same way). Enter
sends; Esc then Enter, or a line ending in a backslash, starts a new line. Ctrl-C cancels the
running turn (at the prompt it clears the line); Ctrl-D leaves (exit 0). Commands:
`/new`, `/model NAME`, `/tools on|off [NAME]`, `/attach`, `/help`. Input history is
kept in `$JP_STATE_DIR/chat_history`.

`jp acp` serves an editor as an Agent Client Protocol agent on stdin/stdout (see the
README's "Editors" section): its sessions are conversations of the shared daemon.

`jp attach` re-attaches to a running turn (default: the newest), shows it from its
start, then streams it live until it completes; with nothing running it says so and
exits 4. With `--from-seq N` it first replays every event after N (default
conversation: this workspace's).

Questions and permissions: with a terminal (`/dev/tty`, also when stdin is a pipe),
`jp query` and `jp attach` ask them there: `y`/`n` (uppercase `Y`/`N` also remember
the answer for the turn, when allowed), a number for a choice, a line for text, hidden
input for secrets, Enter for the default shown. Ctrl-C or Ctrl-D at a prompt dismisses
the question; one answered elsewhere is dismissed with a note. Without a terminal, or
with `--non-interactive` or `--detach`, the daemon's detached policy applies (`defer`
by default: `jp inquiry ls` lists the waiting questions, `jp inquiry answer ID VALUE`
answers one; VALUE is JSON when it parses, else a string; `true`/`false` for a
permission).

`-t NAME` / `-T NAME` enable / disable a tool for this turn, a bare `-t`/`-T` all tools
(but those whose `allow_toggle` refuses it), applied left to right. A bare `-t`/`-T`
takes the next word as NAME: put the message first, or after `--`.

`-c KEY=VALUE` (repeatable) overrides config for this turn: the key is split on dots
(a quoted segment may contain dots: `conversation.tools.'*'.detached=deny`), the value
is JSON when it parses as JSON, else a string; later options win.

Exit codes:
    0    success: the turn ended with `end_turn` or `max_tokens`, or was detached
         (`--detach`, or Ctrl-C then "detach"); any other command succeeded
    1    error: the turn ended with `error`, the daemon refused a request (e.g. a
         config error, a refused tool toggle, an unknown conversation or inquiry, an
         invalid answer), or the daemon could not be started or reached
    2    usage error (bad arguments)
    3    `jp daemon status`: no daemon is running
    4    `jp attach`, `jp turn cancel`: no turn is running there; `jp turn resume`:
         no interrupted turn to resume
    130  cancelled (Ctrl-C, or the turn was cancelled elsewhere)

Environment:
    JP_SOCKET    the daemon's socket (default: <user runtime dir>/jp/jpd.sock)
    JP_STATE_DIR where `jp` remembers each workspace's conversation
                 (default: ~/.local/state/jp)
    JP_STDIN_LIMIT  bytes of piped input `jp query` sends at most (default 1 MiB)
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

from jpcli import __version__

# `typing` costs several milliseconds at start-up and is needed only by the type checker.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from jpcli.commands import Output

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


def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def _non_negative(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value!r}")
    return number


class _Toggle(argparse.Action):
    """`-t [NAME]` / `-T [NAME]`: one `{enable, name?}` toggle, kept in command-line order."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        toggle: dict[str, Any] = {"enable": self.const}
        if isinstance(values, str):
            if not values.strip():
                raise argparse.ArgumentError(self, "expected a tool name")
            toggle["name"] = values
        toggles = list(getattr(namespace, self.dest, None) or [])
        setattr(namespace, self.dest, [*toggles, toggle])


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
    query.add_argument(
        "--conversation",
        metavar="ID",
        help="continue conversation ID (any unique prefix of its id)",
    )
    query.add_argument("-m", "--model", help="model as <provider>/<model>, or an alias")
    query.add_argument("-s", "--system", metavar="TEXT", help="the system prompt for this turn")
    query.add_argument(
        "-c",
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override for this turn (repeatable; VALUE is JSON or a string)",
    )
    query.add_argument(
        "-t",
        "--tool",
        dest="tools",
        action=_Toggle,
        nargs="?",
        const=True,
        default=[],
        metavar="NAME",
        help="enable tool NAME for this turn (bare: all tools); repeatable, left to right",
    )
    query.add_argument(
        "-T",
        "--no-tool",
        dest="tools",
        action=_Toggle,
        nargs="?",
        const=False,
        default=[],
        metavar="NAME",
        help="disable tool NAME for this turn (bare: all tools); repeatable, left to right",
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

    chat = commands.add_parser(
        "chat", help="a REPL on this workspace's conversation (plain `jp` on a terminal)"
    )
    chat.add_argument("--new", action="store_true", help="start a new conversation")
    chat.add_argument("-m", "--model", help="model as <provider>/<model>, or an alias")

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
    turn_cancel = turn_actions.add_parser(
        "cancel",
        help="cancel a running turn and wait until it stopped",
        epilog=_examples("jp turn cancel", "jp turn cancel c-2026"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    turn_cancel.add_argument(
        "conversation",
        nargs="?",
        metavar="CONVERSATION",
        help="id or unique prefix (default: this workspace's conversation, or the only turn)",
    )
    turn_resume = turn_actions.add_parser(
        "resume",
        help="continue a turn the daemon was stopped during, and show it",
        epilog=_examples("jp turn resume", "jp turn resume c-2026"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    turn_resume.add_argument(
        "conversation",
        nargs="?",
        metavar="CONVERSATION",
        help="id or unique prefix (default: the most recent resumable turn)",
    )
    turn_resume.add_argument("--non-interactive", action="store_true", help="never prompt")
    _format_option(turn_resume)

    inquiry = commands.add_parser("inquiry", help="questions waiting for an answer")
    inquiry_actions = inquiry.add_subparsers(dest="action", metavar="ACTION")
    inquiry_ls = inquiry_actions.add_parser("ls", aliases=["list"], help="pending questions")
    _format_option(inquiry_ls)
    answer = inquiry_actions.add_parser("answer", help="answer a pending question")
    answer.add_argument(
        "--remember", action="store_true", help="remember the answer for the rest of the turn"
    )
    answer.add_argument("id", metavar="ID", help="the inquiry id (see `jp inquiry ls`)")
    answer.add_argument(
        "value",
        nargs="?",
        metavar="VALUE",
        help="the answer: JSON when it parses, else a string; omitted: asked on the "
        "terminal (hidden for a secret) or read from stdin. Secrets are never taken here",
    )

    conversation = commands.add_parser(
        "conversation", aliases=["c"], help="list, show or remove conversations"
    )
    actions = conversation.add_subparsers(dest="action", metavar="ACTION")
    conversation_ls = actions.add_parser(
        "ls", aliases=["list"], help="list conversations, newest first (* = this workspace's)"
    )
    _format_option(conversation_ls)
    conversation_ls.add_argument(
        "--ids", action="store_true", help="only the ids, one per line (for scripts)"
    )
    show = actions.add_parser("show", help="print a conversation's events and token usage")
    show.add_argument("id", metavar="ID", help="id or unique prefix")
    _format_option(show)
    use = actions.add_parser(
        "use",
        help="make ID the conversation `jp query` continues in this workspace",
        epilog=_examples("jp conversation use c-20261122T01"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    use.add_argument("id", metavar="ID", help="id or unique prefix")
    remove = actions.add_parser("rm", aliases=["delete"], help="delete a conversation")
    remove.add_argument("id", metavar="ID", help="id or unique prefix")

    daemon = commands.add_parser("daemon", help="the shared daemon: status, stop")
    daemon_actions = daemon.add_subparsers(dest="action", metavar="ACTION")
    status = daemon_actions.add_parser("status", help="pid, uptime, clients, running turns")
    _format_option(status)
    daemon_actions.add_parser("stop", help="cancel running turns (recorded) and stop the daemon")
    commands.add_parser(
        "acp", help="serve an editor (Zed, JetBrains, Neovim) as an ACP agent on stdio"
    )
    config = commands.add_parser("config", help="config files: where they are, a starter")
    config_actions = config.add_subparsers(dest="action", metavar="ACTION")
    config_actions.add_parser("path", help="the user and workspace config files")
    config_show = config_actions.add_parser(
        "show", help="the effective config, each key with the file it came from"
    )
    config_show.add_argument(
        "-c",
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an override to show laid over the files (as for jp query)",
    )
    _format_option(config_show)
    init = config_actions.add_parser("init", help="write a commented starter user config")
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    completion = commands.add_parser(
        "completion", help="print a shell completion script (conversation ids included)"
    )
    completion.add_argument("shell", choices=("bash", "zsh", "fish"))
    models = commands.add_parser(
        "models", help="providers (usable, or why not), the default model, aliases"
    )
    _format_option(models)
    _add_examples(parser)
    return parser


EXAMPLES = {
    "jp": (
        'jp query "Explain this error"',
        'git diff | jp query "review this"',
        "jp attach",
    ),
    "jp query": (
        'jp query "What does this function do?"',
        'jp query --new -m anthropic/claude-sonnet-4-5 -s "Be terse." "hi"',
        'git diff | jp query --conversation c-2026 "review this"',
    ),
    "jp chat": ("jp chat", "jp chat --new -m anthropic/claude-sonnet-4-5"),
    "jp attach": ("jp attach", "jp attach c-2026 --from-seq 0"),
    "jp turn": ("jp turn ls", "jp turn cancel", "jp turn resume"),
    "jp turn ls": ("jp turn ls", "jp turn ls -F json"),
    "jp inquiry": ("jp inquiry ls", "jp inquiry answer call_1.q.1 true"),
    "jp inquiry ls": ("jp inquiry ls", "jp inquiry ls -F json"),
    "jp inquiry answer": (
        "jp inquiry answer call_1.q.1 true",
        "jp inquiry answer call_1.token.1   # a secret: typed hidden, or piped on stdin",
    ),
    "jp conversation": ("jp conversation ls", "jp conversation use c-2026"),
    "jp conversation ls": ("jp conversation ls", "jp conversation ls -F json"),
    "jp conversation show": ("jp conversation show c-2026", "jp conversation show c-2026 -F json"),
    "jp conversation rm": ("jp conversation rm c-20261122T015745-755e70fe",),
    "jp daemon": ("jp daemon status", "jp daemon stop"),
    "jp daemon status": ("jp daemon status", "jp daemon status -F json"),
    "jp daemon stop": ("jp daemon stop",),
    "jp models": ("jp models", "jp models -F json"),
    "jp config": ("jp config path", "jp config init"),
    "jp config path": ("jp config path",),
    "jp config show": ("jp config show", "jp config show -c assistant.model.id=openai/gpt-4o"),
    "jp config init": ("jp config init", "JP_CONFIG=~/work.toml jp config init"),
    "jp completion": (
        'eval "$(jp completion bash)"   # in ~/.bashrc',
        'eval "$(jp completion zsh)"    # in ~/.zshrc',
        "jp completion fish > ~/.config/fish/completions/jp.fish",
    ),
    "jp acp": ("jp acp   # started by the editor, speaking ACP on stdio",),
}


def _add_examples(parser: argparse.ArgumentParser) -> None:
    """Give `parser` and every subcommand the examples of `EXAMPLES` (in `--help`)."""
    key = " ".join(word for word in parser.prog.split() if not word.startswith("-"))
    examples = EXAMPLES.get(key)
    if examples and not parser.epilog:
        parser.epilog = _examples(*examples)
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                _add_examples(sub)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _query_inputs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Any]:
    """Validate the query arguments (usage errors exit 2 through `parser.error`)."""
    from jpcli.overrides import parse_config_overrides

    message = " ".join(args.message)
    if not _isatty(sys.stdin):
        piped = _read_stdin(parser)
        if not args.message:
            message = piped
        elif piped.strip():
            message = with_piped_input(message, piped)
    if not message.strip():
        parser.error("query: a MESSAGE is required")
    if args.detach and _private(args):
        parser.error("query: --detach needs the shared daemon (not --stdio or JPD_COMMAND)")
    try:
        config = parse_config_overrides(args.config)
    except ValueError as exc:
        parser.error(f"-c: {exc}")
    if args.system is not None:
        assistant = config.get("assistant")
        config["assistant"] = {**(assistant if isinstance(assistant, dict) else {})}
        config["assistant"]["system_prompt"] = args.system
    if args.new and args.conversation:
        parser.error("query: --new and --conversation exclude each other")
    return {
        "message": message,
        "new": args.new,
        "conversation": args.conversation,
        "model": args.model,
        "config": config,
        "tools": args.tools,
        "detach": args.detach,
        "non_interactive": args.non_interactive,
    }


STDIN_LIMIT = 1024 * 1024
"""Bytes of piped input `jp query` sends at most (`$JP_STDIN_LIMIT` overrides)."""


def _read_stdin(parser: argparse.ArgumentParser) -> str:
    limit = STDIN_LIMIT
    with contextlib.suppress(ValueError):
        limit = int(os.environ.get("JP_STDIN_LIMIT", "") or STDIN_LIMIT)
    try:
        binary = getattr(sys.stdin, "buffer", None)
        data = binary.read(limit + 1) if binary is not None else sys.stdin.read(limit + 1).encode()
    except (AttributeError, OSError, ValueError):  # no stdin, or a closed one
        return ""
    if len(data) > limit:
        parser.error(
            f"query: piped input is larger than {limit} bytes; send less "
            "(e.g. `head -c`), or raise JP_STDIN_LIMIT"
        )
    return data.decode("utf-8", errors="replace")


def with_piped_input(message: str, piped: str) -> str:
    """The message followed by the piped text, marked so the model (and whoever reads the
    conversation) can tell them apart."""
    body = piped if piped.endswith("\n") else piped + "\n"
    return f"{message}\n\n<stdin>\n{body}</stdin>"


def _private(args: argparse.Namespace) -> bool:
    return bool(args.stdio or os.environ.get("JPD_COMMAND", "").strip())


def main(argv: list[str] | None = None) -> int:
    """Run `jp` with `argv` (default: `sys.argv[1:]`); returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        needs_action = ("conversation", "c", "turn", "daemon", "inquiry", "config")
        if args.command is None and _isatty(sys.stdin) and _isatty(sys.stdout):
            args = parser.parse_args(["chat"])
        if args.command is None or (args.command in needs_action and not args.action):
            parser.print_usage(sys.stderr)
            return EXIT_USAGE
        if args.command == "acp":
            from jpcli.acp import main as acp_main

            return acp_main()
        inputs = _query_inputs(parser, args) if args.command in ("query", "q") else {}
        if args.command == "config" and args.action == "show":
            from jpcli.overrides import parse_config_overrides

            try:
                inputs = {"overrides": parse_config_overrides(args.config)}
            except ValueError as exc:
                parser.error(f"-c: {exc}")
        elif args.command == "config":
            from jpcli import config_files

            if args.action == "path":
                return config_files.config_path(os.environ, os.getcwd(), out=sys.stdout)
            return config_files.config_init(
                os.environ, force=args.force, out=sys.stdout, err=sys.stderr
            )
        if args.command == "completion":
            from jpcli.completion import SHELLS

            sys.stdout.write(SHELLS[args.shell](parser))
            return EXIT_OK
    except SystemExit as exc:  # argparse: --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    return _run(args, inputs)


def _asks(args: argparse.Namespace) -> bool:
    """Whether this command answers the daemon's questions on the terminal."""
    if args.command == "chat":
        from jpcli.tty import tty_available

        return tty_available()
    interactive = ("query", "q", "attach")
    resuming = args.command == "turn" and getattr(args, "action", None) == "resume"
    if (args.command not in interactive and not resuming) or args.non_interactive:
        return False
    if getattr(args, "detach", False):
        return False  # it returns at once: questions wait for `jp attach` or `jp inquiry`
    from jpcli.tty import tty_available

    return tty_available()


def _output(args: argparse.Namespace) -> Output:
    from jpcli.commands import Output

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


def _dispatch(args: argparse.Namespace, inputs: dict[str, Any], daemon: Any, prompter: Any) -> int:
    from jpcli import admin, commands

    connection = daemon.start()
    output = _output(args)
    out, err = output.out, output.err
    command, action = args.command, getattr(args, "action", None)
    from jpcli.current import CurrentConversations

    current = CurrentConversations(os.environ)
    if command in ("query", "q"):
        from jpcli.daemon import client_environment

        return commands.query(
            connection,
            **inputs,
            output=output,
            prompter=prompter,
            environment=client_environment(),
            current=current,
        )
    if command == "chat":
        from jpcli.chat import chat
        from jpcli.daemon import client_environment

        return chat(
            connection,
            output=output,
            prompter=prompter,
            environment=client_environment(),
            current=current,
            env=os.environ,
            model=args.model,
            new=args.new,
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
        from jpcli.daemon import client_environment

        return config_show(
            connection,
            overrides=inputs["overrides"],
            environment=client_environment(),
            out=out,
            err=err,
            as_json=output.json,
        )
    if command == "models":
        from jpcli.daemon import client_environment

        return admin.model_list(
            connection, out=out, as_json=output.json, environment=client_environment()
        )
    if command == "turn" and action == "resume":
        from jpcli.daemon import client_environment

        return commands.resume(
            connection,
            args.conversation,
            non_interactive=args.non_interactive,
            output=output,
            prompter=prompter,
            environment=client_environment(),
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
                stdin_tty=_isatty(sys.stdin),
            )
        return inquiries.inquiry_list(connection, out=out, err=err, as_json=output.json)
    if command == "daemon" and action == "status":
        return admin.daemon_status(connection, out=out, as_json=output.json)
    if command == "daemon":
        wait = getattr(daemon, "wait_stopped", None)
        code = admin.daemon_stop(connection, out=out, err=err, wait_stopped=wait)
        daemon.close()
        return code
    if action in ("ls", "list"):
        return commands.conversation_list(
            connection, out=out, as_json=output.json, current=current, ids_only=args.ids
        )
    if action == "show":
        return commands.conversation_show(
            connection, args.id, out=out, err=err, as_json=output.json
        )
    if action == "use":
        return commands.conversation_use(connection, args.id, out=out, err=err, current=current)
    return commands.conversation_remove(connection, args.id, err=err, current=current)


def _run(args: argparse.Namespace, inputs: dict[str, Any]) -> int:
    # Everything below is imported only once the arguments are known to be good.
    from jpcli.daemon import DaemonError, NotRunning, SocketDaemon
    from jpcli.rpc import ConnectionClosed, RpcError

    err = sys.stderr
    prompter: Any = None
    capabilities: dict[str, Any] = {}
    if _asks(args):
        from jpcli.prompter import CAPABILITIES, TerminalPrompter

        prompter = TerminalPrompter(color=not os.environ.get("NO_COLOR"))
        capabilities = CAPABILITIES
    on_connect = prompter.install if prompter is not None else None
    daemon: Any
    if _private(args):
        from jpcli.stdio_daemon import StdioDaemon

        daemon = StdioDaemon(
            workspace_root=os.getcwd(), capabilities=capabilities, on_connect=on_connect
        )
    else:
        from jpcli.terminal import Spinner

        spinner = Spinner(err, enabled=_isatty(err))
        # `jp daemon ...` never starts a daemon just to ask about it or stop it.
        daemon = SocketDaemon(
            workspace_root=os.getcwd(),
            autostart=args.command != "daemon",
            check_data_dir=args.command != "daemon",
            progress=lambda done: spinner.clear() if done else spinner.tick("starting jpd"),
            capabilities=capabilities,
            on_connect=on_connect,
        )
    try:
        try:
            code = _dispatch(args, inputs, daemon, prompter)
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
