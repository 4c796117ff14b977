"""`jp`: the thin command-line client of the `jpd` daemon.

Usage:
    jp [--stdio] query [--new | --conversation ID] [-m MODEL] [-s TEXT] [-c KEY=VALUE]...
                       [-t [NAME]]... [-T [NAME]]... [--detach] [--non-interactive]
                       [-F text|json] MESSAGE...
    jp [chat [--new] [-m MODEL]]
    jp attach [CONVERSATION] [--from-seq N] [--non-interactive] [-F text|json]
    jp turn ls [-F text|json] | cancel [CONVERSATION] | resume [CONVERSATION]
           | undo [TURN] [-c CONVERSATION] | diff [TURN] [-c CONVERSATION]
    jp inquiry ls [-F text|json] | answer [--remember] ID [VALUE]
    jp conversation ls | show ID | use ID | rm ID
    jp daemon status [-F text|json] | stop
    jp models [-F text|json]
    jp completion bash|zsh|fish
    jp config path | init [--force] | show [-c KEY=VALUE]... [-F text|json]
    jp acp
    jp proxy
    jp --remote [USER@]HOST[:/PATH] COMMAND...    (or $JP_REMOTE: any command above)

`jp` talks to the shared daemon on its Unix socket (`$JP_SOCKET`, else
`<user runtime dir>/jp/jpd.sock`, or `jpd-<hash>.sock` for a `$JP_DATA_DIR` of its own),
starting `jpd --listen` in the background when no daemon answers. Turns run in the
daemon: closing `jp` does not stop them. Each turn runs with this shell's working
directory and environment (`JP_CONFIG`, API keys, the tools' environment), sent with
the request and used for that turn only.

`jp --remote HOST` (or `$JP_REMOTE`) runs `ssh HOST jp proxy` and uses the daemon of
HOST instead: that machine's config, keys, data and, with `HOST:/PATH`, workspace. This
machine's directory and environment are not sent. `jp proxy` bridges its stdio to the
daemon of its machine (starting it), for `jp --remote` on another one.

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
    JP_REMOTE    [user@]HOST[:/path]: use the daemon of HOST over ssh, as `--remote`
    JP_REMOTE_JP the `jp` command on the remote machine (default: jp)
    JP_SSH       the ssh program (default: ssh)
    JPD_COMMAND  run this command as a private daemon on stdio for this one `jp`
                 command (like `--stdio`), instead of using the shared daemon
    NO_COLOR     plain text output

Only the standard library is imported on the start-up path, so `jp` starts fast.
"""

from __future__ import annotations

import contextlib
import os
import sys

# `typing` costs several milliseconds at start-up and is needed only by the type checker.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    import subprocess
    from typing import Any

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_RUNNING = 3
EXIT_CANCELLED = 130


def main(argv: list[str] | None = None, early: subprocess.Popen[bytes] | None = None) -> int:
    """Run `jp` with `argv` (default: `sys.argv[1:]`); returns the exit code.

    `early` is a private daemon already spawned for this command (`jpcli.spawn`)."""
    # Imported here, not at the top: `run` spawns an early daemon before any of this.
    from jpcli.inputs import isatty, query_inputs
    from jpcli.parser import build_parser

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        needs_action: tuple[str, ...] = ("conversation", "c", "turn", "daemon", "inquiry")
        needs_action += ("config", "attachment", "a")
        if args.command is None and isatty(sys.stdin) and isatty(sys.stdout):
            args = parser.parse_args(["chat"])
        if args.command is None or (args.command in needs_action and not args.action):
            parser.print_usage(sys.stderr)
            return EXIT_USAGE
        if args.command == "proxy":
            from jpcli.proxy import main as proxy_main

            return proxy_main()
        if not _use_remote(args, parser):
            return EXIT_USAGE
        if args.command == "acp":
            from jpcli.acp import main as acp_main

            return acp_main()
        inputs = query_inputs(parser, args) if args.command in ("query", "q") else {}
        if args.command == "config" and args.action == "show":
            from jpcli.overrides import parse_config_overrides

            try:
                inputs = {"overrides": parse_config_overrides(args.config), "cfg": args.cfg}
            except ValueError as exc:
                parser.error(f"-c: {exc}")
        elif args.command == "config":
            from jpcli import config_files

            if args.action in ("set", "unset"):
                from jpcli.configs.setting import config_set

                return config_set(
                    dict(os.environ),
                    os.getcwd(),
                    args.key,
                    getattr(args, "value", None),
                    workspace=getattr(args, "workspace", False),
                    file=args.file,
                    out=sys.stdout,
                    err=sys.stderr,
                )
            if args.action == "path":
                return config_files.config_path(os.environ, os.getcwd(), out=sys.stdout)
            return config_files.config_init(
                os.environ, force=args.force, out=sys.stdout, err=sys.stderr
            )
        if args.command == "trust":
            from jpcli import trust

            return trust.run(args.path, revoke_it=args.revoke, list_them=args.list, env=os.environ)
        if args.command in ("query", "q", "chat") or (
            args.command == "config" and args.action == "show"
        ):
            from jpcli.trust import announce_untrusted

            announce_untrusted(os.environ, os.getcwd())
        if args.command == "completion":
            from jpcli.completion import SHELLS

            sys.stdout.write(SHELLS[args.shell](parser))
            return EXIT_OK
    except SystemExit as exc:  # argparse: --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    return _run(args, inputs, early)


def _use_remote(args: argparse.Namespace, parser: argparse.ArgumentParser) -> bool:
    """`--remote` (else `$JP_REMOTE`): checked here, and put in `$JP_REMOTE` for what
    reads it later (the request environment, the ACP bridge). False: a usage error.

    The `--stdio` flag beats `$JP_REMOTE` (a flag is the more explicit); `--remote` with
    `--stdio`, or any remote with `$JPD_COMMAND`, is a contradiction."""
    spec = args.remote if args.remote is not None else os.environ.get("JP_REMOTE", "")
    if args.remote is None and args.stdio:
        spec = ""
    if not spec.strip():
        os.environ.pop("JP_REMOTE", None)
        return True
    from jpcli.remote import parse_remote

    try:
        parse_remote(spec)
    except ValueError as exc:
        sys.stderr.write(f"jp: --remote: {exc}\n")
        return False
    if args.stdio or os.environ.get("JPD_COMMAND", "").strip():
        parser.print_usage(sys.stderr)
        sys.stderr.write("jp: --remote excludes --stdio and JPD_COMMAND\n")
        return False
    os.environ["JP_REMOTE"] = spec.strip()
    return True


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


def _run(
    args: argparse.Namespace, inputs: dict[str, Any], early: subprocess.Popen[bytes] | None
) -> int:
    # Everything below is imported only once the arguments are known to be good.
    import contextlib

    from jpcli.daemon import DaemonError, NotRunning, SocketDaemon
    from jpcli.dispatch import dispatch
    from jpcli.inputs import isatty, private_daemon
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
    remote = os.environ.get("JP_REMOTE")
    if remote:
        from jpcli.remote import RemoteDaemon, parse_remote

        daemon = RemoteDaemon(
            parse_remote(remote), capabilities=capabilities, on_connect=on_connect
        )
    elif private_daemon(args):
        from jpcli.stdio_daemon import StdioDaemon

        daemon = StdioDaemon(
            workspace_root=os.getcwd(),
            capabilities=capabilities,
            on_connect=on_connect,
            process=early,
        )
    else:
        from jpcli.terminal import Spinner

        spinner = Spinner(err, enabled=isatty(err))
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
            code = dispatch(args, inputs, daemon, prompter)
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


def run() -> None:
    """The `jp` command: `main` on this process's arguments, then exit with its code."""
    from jpcli.spawn import discard, launch_early

    early = launch_early(sys.argv[1:])
    try:
        code = main(early=early)
    finally:
        if early is not None and early.poll() is None:
            discard(early)  # not adopted (a usage error, say): the command never used it
    # Everything is done (a private daemon is shut down and gone): exit without the
    # interpreter's teardown of every loaded module, which only keeps a script waiting
    # (a few milliseconds off every command). Output is flushed first; a reader that
    # went away (`jp ... | head -1`) changes nothing.
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
