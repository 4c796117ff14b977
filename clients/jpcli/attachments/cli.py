"""The command line of attachments (JP's names): `jp query -a/--attachment SPEC` and
`jp attachment add|ls|rm`. Standard library only."""

from __future__ import annotations

import argparse

from jpcli.parser import EXAMPLES

SPEC_HELP = (
    "a file, folder or glob (`!GLOB` excludes), an http(s):// URL, cmd://COMMAND "
    "(its output, sandboxed) or jp://ID (another conversation)"
)


def add_query_option(query: argparse.ArgumentParser) -> None:
    query.add_argument(
        "-a",
        "--attachment",
        dest="attachments",
        action="append",
        default=[],
        metavar="SPEC",
        help=f"send {SPEC_HELP} with the message (repeatable)",
    )


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    attachment = commands.add_parser(
        "attachment", aliases=["a"], help="attachments every turn of a conversation sends"
    )
    actions = attachment.add_subparsers(dest="action", metavar="ACTION")
    add = actions.add_parser("add", help="attach SPECs to the conversation")
    add.add_argument("specs", nargs="+", metavar="SPEC", help=SPEC_HELP)
    remove = actions.add_parser("rm", help="remove attachments from the conversation")
    remove.add_argument("specs", nargs="+", metavar="SPEC")
    listing = actions.add_parser("ls", aliases=["list"], help="the conversation's attachments")
    for command in (add, remove, listing):
        command.add_argument("-c", "--conversation", metavar="ID", help="default: current")


EXAMPLES.update(
    {
        "jp attachment": ("jp attachment add 'src/**/*.py' '!src/vendor/**'", "jp attachment ls"),
        "jp attachment add": (
            "jp attachment add README.md https://example.com/spec.html",
            "jp attachment add 'cmd://git log --oneline -20'",
        ),
        "jp attachment rm": ("jp attachment rm README.md",),
        "jp attachment ls": ("jp attachment ls",),
    }
)
