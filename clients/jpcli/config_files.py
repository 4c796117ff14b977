"""`jp config path`, `init` and `show`: where config files live, a starter file, and
the effective config with the origin of each key.

Computed as `jpd` does (`$JP_CONFIG`, else `<XDG_CONFIG_HOME or ~/.config>/jp/config.toml`;
the workspace's `.jp/config.toml`). Standard library only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, TextIO

EXIT_OK = 0
EXIT_ERROR = 1

STARTER = """\
# jp / jpd configuration. Every key is optional; shown values are examples.
# Layers, lowest first: this file < <workspace>/.jp/config.toml < -c key=value.

[assistant]
# system_prompt = "You are a concise assistant."
# tool_choice = "auto"

[assistant.model]
# id = "local/smollm2"                  # <provider>/<model>; the default runs offline
# id = "anthropic/claude-sonnet-4-5"    # needs ANTHROPIC_API_KEY in your environment
# parameters = { max_tokens = 1024 }

[aliases]
# fast = "openai/gpt-4o-mini"           # then: jp query -m fast "..."

# [providers.openai_compatible]
# base_url = "http://localhost:11434/v1"  # ollama, llama.cpp server, vLLM

# A local tool: a command that reads a JSON request on stdin.
# [conversation.tools.deploy]
# command = "./scripts/deploy"
# run = "ask"                          # ask permission before each run
# summary = "Deploy the current branch."
# parameters.environment = { type = "string", enum = ["staging", "production"], required = true }

[daemon]
# idle_timeout = 600                   # seconds before an idle daemon stops; 0: never
"""


def user_config_path(env: Mapping[str, str]) -> str:
    """`$JP_CONFIG`, else `<XDG_CONFIG_HOME or ~/.config>/jp/config.toml` (as `jpd`)."""
    explicit = env.get("JP_CONFIG", "")
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    base = env.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(base):
        base = os.path.expanduser("~/.config")
    return os.path.join(base, "jp", "config.toml")


def config_path(env: Mapping[str, str], cwd: str, *, out: TextIO) -> int:
    """`jp config path`: the user file and this workspace's file (the one the daemon
    reads: `<cwd>/.jp/config.toml`, as `jp` sends its cwd as the workspace), and whether
    they exist or, for the workspace's, are untrusted."""
    from jpcli.trust import is_trusted, workspace_config

    workspace = workspace_config(cwd)
    for label, path in (("user", user_config_path(env)), ("workspace", workspace)):
        state = "" if os.path.exists(path) else "  (absent)"
        if label == "workspace" and not state and not is_trusted(path, env):
            state = "  (untrusted: run `jp trust`)"
        out.write(f"{label + ':':<11}{path}{state}\n")
    return EXIT_OK


def config_init(env: Mapping[str, str], *, force: bool, out: TextIO, err: TextIO) -> int:
    """`jp config init`: write a commented starter user file (never over an existing one
    unless `force`)."""
    path = user_config_path(env)
    if os.path.exists(path) and not force:
        err.write(f"jp: {path} exists; not overwritten (use --force)\n")
        return EXIT_ERROR
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(STARTER)
    out.write(f"wrote {path}\n")
    return EXIT_OK


def config_show(
    connection: Any,
    *,
    overrides: dict[str, Any],
    environment: Mapping[str, Any],
    out: TextIO,
    err: TextIO,
    as_json: bool = False,
    config_files: list[str] | None = None,
) -> int:
    """`jp config show`: one `key = value  # origin` line per effective leaf (from the
    daemon's `config/show`; credentials are redacted there)."""
    from jpcli.rpc import RpcError

    params: dict[str, Any] = {"environment": dict(environment)}
    if overrides:
        params["config"] = overrides
    if config_files:
        params["configFiles"] = config_files
    try:
        result = connection.request("config/show", params)
    except RpcError as exc:
        err.write(f"jp: {exc.message}\n")
        return EXIT_ERROR
    for warning in result.get("warnings") or []:
        err.write(f"jp: warning: {warning}\n")
    if as_json:
        out.write(json.dumps(result, ensure_ascii=False) + "\n")
        return EXIT_OK
    for entry in result.get("entries") or []:
        value = entry.get("value")
        shown = "<redacted>" if entry.get("redacted") else json.dumps(value, ensure_ascii=False)
        out.write(f"{entry.get('key')} = {shown}  # {entry.get('origin')}\n")
    return EXIT_OK
