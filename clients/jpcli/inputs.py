"""What a `jp` command reads besides its arguments: whether the standard streams are
terminals, whether a private daemon is asked for, and `jp query`'s checked inputs (the
message, with piped stdin within its limit, and the config overrides).

Standard library only: it is used on every start-up.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

# `typing` costs several milliseconds at start-up and is needed only by the type checker.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def isatty(stream: Any) -> bool:
    """Whether `stream` is a terminal (False for a missing or closed one)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def query_inputs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Any]:
    """Validate the query arguments (usage errors exit 2 through `parser.error`)."""
    from jpcli.conversations.cli import query_extras
    from jpcli.overrides import parse_config_overrides

    extras = query_extras(parser, args)
    message = " ".join(args.message)
    if not isatty(sys.stdin):
        piped = read_stdin(parser)
        if not args.message:
            message = piped
        elif piped.strip():
            message = with_piped_input(message, piped)
    compose = not message.strip() and isatty(sys.stdin) and not args.detach
    if not message.strip() and not compose:
        parser.error("query: a MESSAGE is required")
    if args.detach and private_daemon(args):
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
        "mode": args.mode,
        "images": [read_image(parser, path) for path in args.images],
        "extra": extras["params"],
        "fork": extras["fork"],
        "compose": compose,
    }


IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


def read_image(parser: argparse.ArgumentParser, path: str) -> dict[str, str]:
    """`--image FILE` as a `turn/start` image (its type by the file's extension)."""
    import base64

    mime = IMAGE_TYPES.get(os.path.splitext(path)[1].lower())
    if mime is None:
        parser.error(f"query: --image {path}: not a png, jpeg, gif or webp file")
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as exc:
        parser.error(f"query: --image {path}: {exc.strerror or exc}")
    return {"mimeType": mime, "data": base64.b64encode(data).decode("ascii")}


STDIN_LIMIT = 1024 * 1024
"""Bytes of piped input `jp query` sends at most (`$JP_STDIN_LIMIT` overrides)."""


def read_stdin(parser: argparse.ArgumentParser) -> str:
    """Piped stdin, up to `STDIN_LIMIT` bytes (more is a usage error)."""
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


def private_daemon(args: argparse.Namespace) -> bool:
    """Whether this command runs a private daemon on stdio (`--stdio` or `JPD_COMMAND`)."""
    return bool(args.stdio or os.environ.get("JPD_COMMAND", "").strip())
