"""The `jp` command line's grammar: the argument parser, with examples in each `--help`.

Standard library only: it is built on every start-up.
"""

from __future__ import annotations

import argparse

from jpcli import __version__

# `typing` costs several milliseconds at start-up and is needed only by the type checker.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


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


def _conversation_argument(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument(
        "conversation",
        nargs="?",
        metavar="CONVERSATION",
        help=f"id or unique prefix (default: {default})",
    )


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
    parser.add_argument(
        "--remote",
        metavar="[USER@]HOST[:/PATH]",
        help="use the daemon of HOST over ssh (`ssh HOST jp proxy`), PATH its workspace "
        "there (default: $JP_REMOTE)",
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
    for flags, enable in ((("-t", "--tool"), True), (("-T", "--no-tool"), False)):
        query.add_argument(
            *flags,
            dest="tools",
            action=_Toggle,
            nargs="?",
            const=enable,
            default=[],
            metavar="NAME",
            help=f"{'enable' if enable else 'disable'} tool NAME for this turn (bare: all "
            "tools); repeatable, left to right",
        )
    query.add_argument(
        "--detach", action="store_true", help="start the turn, print its ids and return"
    )
    _mode_option(query)
    query.add_argument(
        "--image",
        dest="images",
        action="append",
        default=[],
        metavar="FILE",
        help="send image FILE (png, jpeg, gif, webp) with the message; repeatable",
    )
    query.add_argument(
        "--non-interactive",
        action="store_true",
        help="never prompt (questions follow the `deny` detached policy)",
    )
    _format_option(query)
    from jpcli.conversations import cli as conversation_cli

    conversation_cli.add_query_options(query)
    from jpcli.configs.cli import add_cfg_option

    add_cfg_option(query)
    from jpcli.attachments import cli as attachments_cli

    attachments_cli.add_query_option(query)
    query.add_argument("message", nargs="*", metavar="MESSAGE", help="the message (joined)")

    chat = commands.add_parser(
        "chat", help="a REPL on this workspace's conversation (plain `jp` on a terminal)"
    )
    chat.add_argument("--new", action="store_true", help="start a new conversation")
    chat.add_argument("-m", "--model", help="model as <provider>/<model>, or an alias")
    _mode_option(chat)
    add_cfg_option(chat)  # every turn of the chat
    attachments_cli.add_query_option(chat)  # with the first message

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
        "cancel", help="cancel a running turn and wait until it stopped"
    )
    _conversation_argument(turn_cancel, "this workspace's conversation, or the only turn")
    turn_resume = turn_actions.add_parser(
        "resume", help="continue a turn the daemon was stopped during, and show it"
    )
    _conversation_argument(turn_resume, "the most recent resumable turn")
    turn_resume.add_argument("--non-interactive", action="store_true", help="never prompt")
    _format_option(turn_resume)
    turn_undo = turn_actions.add_parser(
        "undo", help="put back the files a turn changed (a created file is removed)"
    )
    turn_undo.add_argument(
        "turn", nargs="?", metavar="TURN", help="turn id (default: the conversation's last turn)"
    )
    turn_undo.add_argument(
        "-c", "--conversation", metavar="ID", help="conversation (default: this workspace's)"
    )
    turn_diff = turn_actions.add_parser(
        "diff", help="show what a turn changed, as diffs against the files now"
    )
    turn_diff.add_argument(
        "turn", nargs="?", metavar="TURN", help="turn id (default: the conversation's last turn)"
    )
    turn_diff.add_argument(
        "-c", "--conversation", metavar="ID", help="conversation (default: this workspace's)"
    )

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
    conversation_cli.add_ls_options(conversation_ls)
    show = actions.add_parser("show", help="print a conversation's events and token usage")
    show.add_argument("id", metavar="ID", help="id or unique prefix")
    _format_option(show)
    use = actions.add_parser(
        "use", help="make ID the conversation `jp query` continues in this workspace"
    )
    use.add_argument("id", metavar="ID", help="id or unique prefix")
    remove = actions.add_parser("rm", aliases=["delete"], help="delete a conversation")
    remove.add_argument("id", metavar="ID", help="id or unique prefix")
    compact = actions.add_parser(
        "compact", help="fold a conversation's older part into a summary now (default: current)"
    )
    compact.add_argument("id", metavar="ID", nargs="?", help="id or unique prefix")
    compact.add_argument("--instructions", help="what the summary should focus on or keep")
    conversation_cli.add_conversation_commands(actions)

    attachments_cli.add_commands(commands)
    daemon = commands.add_parser("daemon", help="the shared daemon: status, stop")
    daemon_actions = daemon.add_subparsers(dest="action", metavar="ACTION")
    status = daemon_actions.add_parser("status", help="pid, uptime, clients, running turns")
    _format_option(status)
    daemon_actions.add_parser("stop", help="cancel running turns (recorded) and stop the daemon")
    commands.add_parser(
        "acp", help="serve an editor (Zed, JetBrains, Neovim) as an ACP agent on stdio"
    )
    commands.add_parser(
        "proxy", help="bridge stdio to this machine's daemon (what `jp --remote` runs via ssh)"
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
    from jpcli.configs import cli as configs_cli

    configs_cli.add_cfg_option(config_show)
    configs_cli.add_config_commands(config_actions)
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
    trust = commands.add_parser(
        "trust", help="trust this workspace's .jp/config.toml (ignored until trusted)"
    )
    trust.add_argument("path", nargs="?", help="the config file or its workspace (default: .)")
    trust_mode = trust.add_mutually_exclusive_group()
    trust_mode.add_argument("--revoke", action="store_true", help="stop trusting it")
    trust_mode.add_argument("--list", action="store_true", help="list trusted config files")
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
    "jp turn": ("jp turn ls", "jp turn cancel", "jp turn resume", "jp turn undo", "jp turn diff"),
    "jp turn undo": ("jp turn undo", "jp turn undo t-e7b89e35e50a -c c-2026"),
    "jp turn diff": ("jp turn diff", "jp turn diff t-e7b89e35e50a -c c-2026"),
    "jp turn ls": ("jp turn ls", "jp turn ls -F json"),
    "jp turn cancel": ("jp turn cancel", "jp turn cancel c-2026"),
    "jp turn resume": ("jp turn resume", "jp turn resume c-2026"),
    "jp inquiry": ("jp inquiry ls", "jp inquiry answer call_1.q.1 true"),
    "jp inquiry ls": ("jp inquiry ls", "jp inquiry ls -F json"),
    "jp inquiry answer": (
        "jp inquiry answer call_1.q.1 true",
        "jp inquiry answer call_1.token.1   # a secret: typed hidden, or piped on stdin",
    ),
    "jp conversation": ("jp conversation ls", "jp conversation use c-2026"),
    "jp conversation ls": ("jp conversation ls", "jp conversation ls -F json"),
    "jp conversation use": ("jp conversation use c-20261122T01",),
    "jp conversation show": ("jp conversation show c-2026", "jp conversation show c-2026 -F json"),
    "jp conversation rm": ("jp conversation rm c-20261122T015745-755e70fe",),
    "jp conversation compact": (
        "jp conversation compact",
        'jp conversation compact c-2026 --instructions "keep the API names"',
    ),
    "jp daemon": ("jp daemon status", "jp daemon stop"),
    "jp daemon status": ("jp daemon status", "jp daemon status -F json"),
    "jp daemon stop": ("jp daemon stop",),
    "jp models": ("jp models", "jp models -F json"),
    "jp trust": ("jp trust", "jp trust ~/src/project", "jp trust --list", "jp trust --revoke"),
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
    "jp proxy": ("ssh devbox jp proxy   # what `jp --remote devbox ...` runs",),
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


PERMISSION_MODES = ("ask", "accept-edits", "auto", "read-only")
"""The turns' permission modes (protocol.md 5.5.1)."""


def _mode_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--mode",
        choices=PERMISSION_MODES,
        help="permission mode: ask (default), accept-edits (file edits run unasked), "
        "auto (nothing asks), read-only (no file edits or commands)",
    )
