"""The command line of named config files (`--cfg NAME|PATH`, JP's flag) and of
`jp config set KEY VALUE`. Standard library only."""

from __future__ import annotations

import argparse

from jpcli.parser import EXAMPLES


def add_cfg_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--cfg",
        dest="cfg",
        action="append",
        default=[],
        metavar="NAME|PATH",
        help="lay the named config file (a persona) or this file over the config; "
        "names are looked up in config_load_paths (repeatable)",
    )


def add_config_commands(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    setting = actions.add_parser("set", help="set KEY to VALUE in the user config file")
    setting.add_argument("key", metavar="KEY", help="a dotted key: assistant.model.id")
    setting.add_argument("value", metavar="VALUE", help="a TOML value, else a string")
    where = setting.add_mutually_exclusive_group()
    where.add_argument(
        "--workspace",
        action="store_true",
        help="in this workspace's .jp/config.toml (it must then be trusted again)",
    )
    where.add_argument("--file", metavar="PATH", help="in this file (a persona, say)")
    unset = actions.add_parser("unset", help="remove KEY from the user config file")
    unset.add_argument("key", metavar="KEY")
    unset.add_argument("--file", metavar="PATH", help="from this file")


EXAMPLES.update(
    {
        "jp config set": (
            "jp config set assistant.model.id anthropic/claude-sonnet-4-5",
            "jp config set --file ~/.config/jp/config/reviewer.toml assistant.system_prompt "
            "'You review code.'",
        ),
        "jp config unset": ("jp config unset assistant.system_prompt",),
    }
)
