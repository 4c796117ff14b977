"""`jp completion bash|zsh|fish`: shell completion scripts, conversation ids included.

The scripts complete commands, actions and options from `jp`'s own parser, and
conversation ids (for `attach`, `conversation show|use|rm`, `turn cancel` and
`--conversation`) by running `jp conversation ls --ids`.
"""

from __future__ import annotations

import argparse

IDS = "jp conversation ls --ids 2>/dev/null"
_ID_ACTIONS = {"conversation": ("show", "use", "rm", "delete"), "turn": ("cancel", "resume")}


def _tree(parser: argparse.ArgumentParser) -> dict[str, tuple[list[str], list[str]]]:
    """command -> (its actions, its options)."""
    tree: dict[str, tuple[list[str], list[str]]] = {}
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for name, sub in action.choices.items():
            actions: list[str] = []
            for inner in sub._actions:
                if isinstance(inner, argparse._SubParsersAction):
                    actions += list(inner.choices)
            options = [o for a in sub._actions for o in a.option_strings]
            tree[name] = (actions, options)
    return tree


def bash(parser: argparse.ArgumentParser) -> str:
    """A bash completion script (also used by zsh through `bashcompinit`)."""
    tree = _tree(parser)
    cases = []
    for name, (actions, options) in sorted(tree.items()):
        words = " ".join(actions or options)
        ids = ""
        if name in ("attach",):
            ids = f'words="$words $({IDS})"'
        elif name in ("conversation", "c", "turn"):
            key = "turn" if name == "turn" else "conversation"
            alts = "|".join(_ID_ACTIONS[key])
            ids = (
                f'case "${{COMP_WORDS[2]}}" in {alts}) '
                f'[[ $COMP_CWORD -ge 3 ]] && words="$({IDS})";; esac'
            )
        cases.append(f'    {name}) words="{words}"; {ids or ":"};;')
    commands = " ".join(sorted(tree))
    return f"""# jp completion for bash: eval "$(jp completion bash)"
_jp() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" words=""
  if [[ $prev == --conversation ]]; then
    COMPREPLY=($(compgen -W "$({IDS})" -- "$cur")); return
  fi
  if [[ $COMP_CWORD -eq 1 ]]; then
    COMPREPLY=($(compgen -W "{commands} --help --version --stdio" -- "$cur")); return
  fi
  case "${{COMP_WORDS[1]}}" in
{chr(10).join(cases)}
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}}
complete -F _jp jp
"""


def zsh(parser: argparse.ArgumentParser) -> str:
    """A zsh script: the bash completion through `bashcompinit`."""
    return (
        '# jp completion for zsh: eval "$(jp completion zsh)"\n'
        "autoload -U +X compinit && compinit\n"
        "autoload -U +X bashcompinit && bashcompinit\n" + bash(parser).split("\n", 1)[1]
    )


def fish(parser: argparse.ArgumentParser) -> str:
    """A fish completion script."""
    tree = _tree(parser)
    lines = [
        "# jp completion for fish: jp completion fish | source",
        "complete -c jp -f",
        f"complete -c jp -n __fish_use_subcommand -a '{' '.join(sorted(tree))}'",
        f"complete -c jp -l conversation -x -a '({IDS})'",
    ]
    for name, (actions, options) in sorted(tree.items()):
        seen = f"__fish_seen_subcommand_from {name}"
        if actions:
            lines.append(f"complete -c jp -n '{seen}' -a '{' '.join(actions)}'")
        for option in options:
            if option.startswith("--"):
                lines.append(f"complete -c jp -n '{seen}' -l {option[2:]}")
    lines.append(f"complete -c jp -n '__fish_seen_subcommand_from attach' -a '({IDS})'")
    for command, id_actions in _ID_ACTIONS.items():
        for action in id_actions:
            lines.append(
                f"complete -c jp -n '__fish_seen_subcommand_from {command}; and "
                f"__fish_seen_subcommand_from {action}' -a '({IDS})'"
            )
    return "\n".join(lines) + "\n"


SHELLS = {"bash": bash, "zsh": zsh, "fish": fish}
