"""`jpd`: the daemon. Serves one client on stdio, or many on a Unix socket with `--listen`.

Exit codes: on stdio, 0 after `shutdown` + `exit` (or `daemon/stop`), else 1. With
`--listen`, 0 after a clean stop (`daemon/stop`, SIGTERM/SIGINT/SIGHUP, idle timeout),
1 when the socket cannot be had (e.g. another daemon already serves it).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import faulthandler
import gc
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import platformdirs

from jpd.private import make_private_dir, restrict_umask

if TYPE_CHECKING:
    from logging.handlers import RotatingFileHandler

LOG_FORMAT = "%(asctime)s jpd[%(process)d] %(levelname)s %(name)s: %(message)s"
LOG_MAX_BYTES = 5 * 1024 * 1024
LOG_BACKUPS = 3


def log_dir(env: Mapping[str, str]) -> Path:
    """Where a listening daemon logs: `$JP_LOG_DIR`, else the platform user log dir."""
    return Path(env.get("JP_LOG_DIR") or platformdirs.user_log_dir("jp"))


def _log_level(explicit: str | None, env: Mapping[str, str], listening: bool) -> str:
    """`--log-level`, else `$JPD_LOG_LEVEL`, else (listening) `daemon.log_level`, else WARNING."""
    if explicit:
        return explicit.upper()
    if env.get("JPD_LOG_LEVEL"):
        return env["JPD_LOG_LEVEL"].upper()
    if listening:
        from jpd.config import ConfigError, load_config

        try:
            return load_config(env=env).daemon.log_level.upper()
        except ConfigError:
            pass  # reported again, with its key, by every turn
    return "WARNING"


def _setup_logging(level: str, env: Mapping[str, str], listening: bool) -> Path | None:
    """stdio: logs to stderr. Listening: to `<log dir>/jpd.log` (rotated), and to stderr
    only when it is a terminal (a daemon started by `jp` has its stderr in that file).
    Returns the log file, if any."""
    handlers: list[logging.Handler] = []
    log_file: Path | None = None
    if listening:
        directory = log_dir(env)
        try:
            make_private_dir(directory)
            handlers.append(_log_file_handler(directory / "jpd.log"))
            log_file = (directory / "jpd.log").absolute()
        except OSError as exc:
            print(f"jpd: warning: cannot log to {directory}: {exc}", file=sys.stderr)
    if not listening or sys.stderr.isatty() or not handlers:
        handlers.append(logging.StreamHandler(sys.stderr))
    logging.basicConfig(level=level, format=LOG_FORMAT, handlers=handlers, force=True)
    logging.getLogger("pygls").setLevel(logging.WARNING)
    if log_file is None:
        # A daemon `jp` started on stdio has its stderr in the log.
        faulthandler.enable(sys.stderr)
    return log_file


def _log_file_handler(path: Path) -> RotatingFileHandler:
    """The rotated log file, where a fatal signal's traceback also goes (`faulthandler`),
    so that `jp` can show why the daemon went away."""
    from logging.handlers import RotatingFileHandler  # stdio: stderr only

    class FaultLoggingHandler(RotatingFileHandler):
        def doRollover(self) -> None:
            super().doRollover()
            if self.stream is not None:  # the new file
                faulthandler.enable(self.stream)

    handler = FaultLoggingHandler(path, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS)
    if handler.stream is not None:
        faulthandler.enable(handler.stream)
    return handler


def main(argv: list[str] | None = None) -> int:
    """Run the daemon; returns the process exit code (see the module docstring)."""
    # Start-up creates a few hundred thousand objects that live as long as the process
    # (lsprotocol's classes, pydantic schemas). The cycle collector would scan them over
    # and over while they load and once more at exit, for nothing: it is paused while the
    # daemon's modules load, which are then frozen (never scanned again), and everything
    # is frozen again at exit (protocol.md section 4, "Start-up").
    gc.disable()
    try:
        return _main(argv)
    finally:
        gc.freeze()
        gc.enable()


def _main(argv: list[str] | None) -> int:
    words = sys.argv[1:] if argv is None else argv
    if words[:1] == ["store"]:  # `jpd store import`: a command, not a daemon
        from jpd.core.store_import import main as store_main

        return store_main(words[1:])
    parser = argparse.ArgumentParser(prog="jpd", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--listen",
        nargs="?",
        const="",
        default=None,
        metavar="PATH",
        help="serve many clients on a Unix socket (default: $JP_SOCKET, else "
        "<user runtime dir>/jp/jpd.sock, or jpd-<hash>.sock for a $JP_DATA_DIR of its own) "
        "instead of one client on stdio",
    )
    parser.add_argument(
        "--listen-ws",
        metavar="ws://HOST:PORT",
        help="with --listen, also serve clients on a WebSocket (a bearer token is always "
        "required: --ws-token-file, else one generated beside the socket; only loopback "
        "without a token file)",
    )
    parser.add_argument(
        "--ws-token-file",
        metavar="FILE",
        help="the WebSocket clients' token (a file of this user, mode 0600)",
    )
    parser.add_argument(
        "--log-level",
        default=None,
        help="log level (default: $JPD_LOG_LEVEL, else daemon.log_level when listening, "
        "else WARNING)",
    )
    args = parser.parse_args(argv)
    if (args.listen_ws or args.ws_token_file) and args.listen is None:
        parser.error("--listen-ws and --ws-token-file need --listen")
    restrict_umask()  # before any file is created, the log included
    env = os.environ
    from jpd.httpx_cli import skip_httpx_cli
    from jpd.pydantic_plugins import run_without_plugins
    from jpd.settings import Settings

    # The environment as it is, for the turns and the tools: the plugin switch set just
    # after is the daemon's own, not theirs.
    settings = Settings.from_env()
    # No third-party pydantic plugins (they would see secrets), and none looked for:
    # before the first validator is built (`daemon.log_level` read below, initialize's
    # result built as `jpd.rpc.methods` loads), or the lookup imports package metadata.
    run_without_plugins()
    skip_httpx_cli()  # before the first model call imports httpx
    listening = args.listen is not None
    level = _log_level(args.log_level, env, listening)
    try:
        log_file = _setup_logging(level, env, listening)
    except ValueError as exc:  # an unknown level name
        parser.error(str(exc))
    # The daemon's modules load only now, with the collector paused (see `main`).
    import anyio

    from jpd.rpc.stdio import claim_stdout
    from jpd.server import create_server

    server = create_server(dataclasses.replace(settings, log_file=log_file))
    gc.freeze()
    # Young collections every 10,000 allocations rather than 700: a daemon streaming
    # a thousand turns allocates at every token, and each young collection also walks
    # what survived the last ones (the turns' live state). The middle generation is
    # collected every 3 young collections rather than 10: a collection holds the GIL
    # throughout, so the control lane's threads wait for it (protocol.md section 3);
    # with a thousand turns starting at once, a pass over ten collections' survivors
    # took 40-70 ms of CPU, over three's 20-30 (`python -m bench --only turns`). Full
    # passes stay every 99 young collections (as 10 x 10 did): one over a thousand
    # turns' state holds the GIL for 300 ms. When many turns end at once, frees hold the
    # young count down: `jpd.core.gc_pacer` collects then.
    gc.set_threshold(10_000, 3, 33)
    gc.enable()
    if listening:
        from jpd.rpc.socket_claim import ListenError

        path = Path(args.listen) if args.listen else None
        try:
            token = Path(args.ws_token_file) if args.ws_token_file else None
            return anyio.run(server.run_listen, path, args.listen_ws, token)
        except ListenError as exc:
            logging.getLogger("jpd").error("%s", exc)
            if not sys.stderr.isatty():  # on a terminal, the log line above says it already
                print(f"jpd: error: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:  # before the signal handlers were installed
            return 1
    out_fd = claim_stdout()
    try:
        return anyio.run(server.run_stdio, sys.stdin.fileno(), out_fd)
    except KeyboardInterrupt:
        return 1


def run() -> NoReturn:
    """The `jpd` command: `main`, then exit without the interpreter's teardown.

    By then the store is closed and synced and the connection flushed; unloading the
    hundreds of modules a daemon holds would only keep its client (`jp --stdio`
    waits for the process to end) waiting.
    """
    code = main()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
