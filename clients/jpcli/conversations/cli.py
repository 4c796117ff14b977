"""The command line of organising conversations (JP's names and flags): `jp conversation
fork|grep|label|title|archive|unarchive|pin|unpin`, the options of `conversation ls`, and
`jp query --fork/--label/--title/--tmp/--no-persist`. Standard library only."""

from __future__ import annotations

import argparse
import re

from jpcli.parser import EXAMPLES

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")
_UNITS = {
    "": 1,
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hr": 3600,
    "hrs": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "w": 604800,
    "week": 604800,
    "weeks": 604800,
}
DEFAULT_TMP = 3600.0
"""`--tmp` without a duration: the conversation lasts an hour."""


def duration(text: str) -> float:
    """Seconds of `90s`, `10m`, `2h`, `1d 12h`, `5days` (humantime's spellings)."""
    compact = text.strip().lower()
    total, position = 0.0, 0
    for match in _DURATION.finditer(compact):
        if compact[position : match.start()].strip() or match.group(2) not in _UNITS:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    else:
        if compact and not compact[position:].strip():
            return total
    raise argparse.ArgumentTypeError(f"expected a duration like 30s, 10m, 2h or 1d, got {text!r}")


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a number of turns, got {text!r}")
    return int(text)


def add_query_options(query: argparse.ArgumentParser) -> None:
    """`jp query`'s options for the conversation a turn runs in."""
    query.add_argument(
        "--fork",
        nargs="?",
        const="",
        metavar="N",
        help="run in a fork of the conversation (--fork=N: of its last N turns only)",
    )
    query.add_argument(
        "-l",
        "--label",
        dest="labels",
        action="append",
        default=[],
        metavar="LABEL",
        help="add LABEL to the conversation (repeatable)",
    )
    query.add_argument("--title", help="set the conversation's title")
    query.add_argument(
        "--schema",
        metavar="JSON|FILE",
        help="answer with JSON valid against this JSON schema (printed alone on stdout)",
    )
    ephemeral = query.add_mutually_exclusive_group()
    ephemeral.add_argument(
        "--tmp",
        nargs="?",
        const="",
        metavar="DURATION",
        help="the daemon deletes the conversation after DURATION (default 1h)",
    )
    ephemeral.add_argument(
        "--no-persist",
        action="store_true",
        help="a new conversation, deleted as soon as the turn ends",
    )


def add_conversation_commands(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The subcommands of `jp conversation` that organise conversations."""
    fork = actions.add_parser(
        "fork", help="copy a conversation (or some of its turns) into a new one"
    )
    fork.add_argument("id", metavar="ID", nargs="?", help="id or unique prefix (default: current)")
    fork.add_argument("-f", "--first", type=_count, metavar="N", help="keep the first N turns")
    fork.add_argument("--last", type=_count, metavar="N", help="keep the last N turns")
    fork.add_argument(
        "--from",
        dest="from_time",
        metavar="WHEN",
        help="keep turns since WHEN (2h, 1d, or an ISO time)",
    )
    fork.add_argument("--until", metavar="WHEN", help="keep turns before WHEN")
    fork.add_argument("--title", help="the fork's title")
    fork.add_argument(
        "-l",
        "--label",
        dest="labels",
        action="append",
        default=[],
        metavar="LABEL",
        help="add LABEL to the fork",
    )
    fork.add_argument(
        "--no-use", action="store_true", help="do not make the fork this workspace's conversation"
    )

    grep = actions.add_parser("grep", help="search every conversation's messages (regex)")
    grep.add_argument("pattern", metavar="PATTERN", help="a regular expression (smart case)")
    grep.add_argument("-i", "--ignore-case", action="store_true", help="ignore case")
    grep.add_argument("-s", "--case-sensitive", action="store_true", help="match case")
    grep.add_argument(
        "-C", "--context", type=int, default=0, metavar="N", help="N lines of context"
    )
    grep.add_argument(
        "-l",
        "--label",
        dest="labels",
        action="append",
        default=[],
        metavar="LABEL",
        help="only conversations with LABEL",
    )
    grep.add_argument("--archived", action="store_true", help="search archived conversations too")
    grep.add_argument("-c", "--conversation", metavar="ID", help="only this conversation")
    grep.add_argument("-F", "--format", choices=("text", "json"), default="text")

    label = actions.add_parser("label", help="add or remove a conversation's labels")
    label_actions = label.add_subparsers(dest="label_action", metavar="ACTION", required=True)
    for name, text in (("add", "add labels"), ("rm", "remove labels")):
        command = label_actions.add_parser(name, help=text)
        command.add_argument("labels", nargs="+", metavar="LABEL")
        command.add_argument("-c", "--conversation", metavar="ID", help="default: current")

    title = actions.add_parser("title", help="set a conversation's title")
    title.add_argument("id", metavar="ID", help="id or unique prefix")
    title.add_argument("text", nargs="+", metavar="TEXT", help="the title (joined)")

    for name, text in (
        ("archive", "hide a conversation from `ls` (ls --archived shows it)"),
        ("unarchive", "list an archived conversation again"),
        ("pin", "list a conversation first"),
        ("unpin", "list a pinned conversation in its place again"),
    ):
        command = actions.add_parser(name, help=text)
        command.add_argument(
            "id", metavar="ID", nargs="?", help="id or unique prefix (default: current)"
        )


def add_ls_options(ls: argparse.ArgumentParser) -> None:
    ls.add_argument("--sort", choices=("updated", "created", "title", "events"), default="updated")
    ls.add_argument(
        "--descending",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="order (default: newest or largest first; titles A-Z)",
    )
    ls.add_argument("-n", "--limit", type=_count, metavar="N", help="at most N conversations")
    ls.add_argument("--archived", action="store_true", help="only archived conversations")
    ls.add_argument("--all", action="store_true", help="archived ones too")
    ls.add_argument(
        "-l",
        "--label",
        dest="labels",
        action="append",
        default=[],
        metavar="LABEL",
        help="only conversations with LABEL (repeatable: all of them)",
    )


ORGANIZE_ACTIONS = frozenset(
    {"fork", "grep", "label", "title", "archive", "unarchive", "pin", "unpin"}
)

EXAMPLES.update(
    {
        "jp conversation fork": ("jp conversation fork", "jp conversation fork c-2026 --last 2"),
        "jp conversation grep": (
            "jp conversation grep 'retry.*backoff'",
            "jp conversation grep -C 2 -l work TODO",
        ),
        "jp conversation label": (
            "jp conversation label add work urgent",
            "jp conversation label rm urgent -c c-2026",
        ),
        "jp conversation title": ('jp conversation title c-2026 "Release checklist"',),
        "jp conversation label add": ("jp conversation label add work urgent",),
        "jp conversation label rm": ("jp conversation label rm urgent -c c-2026",),
        "jp conversation archive": ("jp conversation archive c-2026",),
        "jp conversation unarchive": ("jp conversation unarchive c-2026",),
        "jp conversation pin": ("jp conversation pin",),
        "jp conversation unpin": ("jp conversation unpin c-2026",),
    }
)


def query_extras(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, object]:
    """The `turn/start` params of `--label/--title/--tmp/--no-persist`, and `fork` (None:
    no fork; -1: all turns; N: the last N). A word after a bare `--fork` or `--tmp` that
    is no count or duration is the message's first word (`jp q --tmp what is x`)."""
    extras: dict[str, object] = {}
    fork, tmp = args.fork, args.tmp
    if fork and not fork.isdigit():
        args.message.insert(0, fork)
        fork = ""
    if tmp:
        try:
            seconds = duration(tmp)
        except argparse.ArgumentTypeError:
            args.message.insert(0, tmp)
            seconds = DEFAULT_TMP
        extras["expiresIn"] = seconds
    elif tmp == "":
        extras["expiresIn"] = DEFAULT_TMP
    if args.schema is not None:
        from jpcli.structured.schema import read_schema

        if args.detach:
            parser.error("query: --schema prints the answer; it cannot --detach")
        extras["responseSchema"] = read_schema(parser, args.schema)
    if args.cfg:
        extras["configFiles"] = list(args.cfg)
    if args.attachments:
        extras["attachments"] = list(args.attachments)
    if args.labels:
        extras["labels"] = list(args.labels)
    if args.title:
        extras["title"] = args.title
    if args.no_persist:
        if args.conversation or fork is not None:
            parser.error("query: --no-persist starts a new conversation (no --conversation/--fork)")
        args.new = True
        extras["persist"] = False
    if tmp is not None and not args.new and fork is None:
        parser.error(
            "query: --tmp needs --new or --fork (JP's rule: a temporary conversation is a new one)"
        )
    return {"params": extras, "fork": None if fork is None else int(fork) if fork else -1}
