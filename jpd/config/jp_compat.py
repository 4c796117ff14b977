"""JP's config files, read as jpd's (issue 37 item 9).

JP (github dcdpr/jp) spells a few things differently: `assistant.model.id` may be the
table `{provider, name}`, MCP servers are `[providers.mcp.<name>]` with `command`,
`arguments` and `variables`, hosted providers sit under `providers.llm.<name>`, and
model aliases under `providers.llm.aliases`. Those are rewritten to jpd's keys. Keys
JP knows and jpd does not use (styles, editor, plugins, request tuning...) are dropped
with a warning naming each, so a JP file loads; any other unknown key is still an
error (a typo should not pass silently).

`translate` never makes a setting less safe than JP's: `run = "edit"` (JP lets the
user edit the arguments) becomes `ask`.
"""

from __future__ import annotations

import copy
from typing import Any

JP_ONLY: tuple[str, ...] = (
    "extends",
    "inherit",
    "user",
    "template",
    "style",
    "plugins",
    "interrupt",
    "editor",
    "assistant.name",
    "assistant.request",
    "assistant.model.parameters.other",
    "assistant.model.parameters.stop_words",
    "assistant.model.parameters.top_k",
    "assistant.model.parameters.top_p",
    "conversation.attachments",
    "conversation.default_id",
    "conversation.labels",
    "conversation.start_local",
    "conversation.compaction",
    "conversation.title.from_heading",
    "conversation.inquiry.assistant.request",
    "conversation.inquiry.assistant.system_prompt_sections",
    "conversation.inquiry.assistant.tool_choice",
    "conversation.tools.*.cancellation_response",
    "conversation.tools.*.format",
    "conversation.tools.*.style.inline_results",
    "conversation.tools.*.style.parameters",
    "conversation.tools.*.style.results_file_link",
    "conversation.tools.*.style.error",
)
"""JP's keys (crates/jp_config, `AppConfig::fields()`) that jpd reads nothing from;
`*` stands for any one key."""

_JPD_PROVIDERS = {"anthropic": ("api_key_env", "base_url"), "openai": ("api_key_env", "base_url")}


def translate(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`data` (one parsed layer) with JP's spellings rewritten and JP-only keys dropped,
    and a warning per change a user should know of (`key: what happened`)."""
    if not isinstance(data, dict):
        return data, []
    out = copy.deepcopy(data)
    warnings: list[str] = []
    _model_ids(out, ())
    assistant = out.get("assistant")
    if isinstance(assistant, dict):
        _assistant(assistant, "assistant", warnings)
    providers = out.get("providers")
    if isinstance(providers, dict):
        _mcp(out, providers, warnings)
        _llm(out, providers, warnings)
        if not providers:
            del out["providers"]
    tools = (
        out.get("conversation", {}).get("tools")
        if isinstance(out.get("conversation"), dict)
        else None
    )
    if isinstance(tools, dict):
        for name, tool in tools.items():
            if isinstance(tool, dict):
                _tool_modes(tool, f"conversation.tools.{name}", warnings)
    for pattern in JP_ONLY:
        _drop(out, pattern.split("."), (), warnings)
    return out, warnings


def _model_ids(node: Any, path: tuple[str, ...]) -> None:
    """Every `model.id = {provider, name}` (assistant, inquiry assistant) as `provider/name`."""
    if not isinstance(node, dict):
        return
    for key, value in list(node.items()):
        if key == "id" and path and path[-1] == "model" and isinstance(value, dict):
            provider, name = value.get("provider"), value.get("name")
            if isinstance(provider, str) and isinstance(name, str) and len(value) == 2:
                node[key] = f"{provider}/{name}"
        else:
            _model_ids(value, (*path, key))


def _assistant(assistant: dict[str, Any], where: str, warnings: list[str]) -> None:
    prompt = assistant.get("system_prompt")
    if isinstance(prompt, dict) and isinstance(prompt.get("value"), str):
        # JP's mergeable string: `{value, strategy}`; jpd's layers replace it.
        assistant["system_prompt"] = prompt["value"]
        if "strategy" in prompt:
            warnings.append(f"{where}.system_prompt.strategy: ignored (a later layer replaces it)")
    params = (
        assistant.get("model", {}).get("parameters")
        if isinstance(assistant.get("model"), dict)
        else None
    )
    if isinstance(params, dict) and "reasoning" in params:
        reasoning = params.pop("reasoning")
        effort = reasoning.get("effort") if isinstance(reasoning, dict) else reasoning
        if effort in ("off", "low", "medium", "high"):
            assistant.setdefault("reasoning", {}).setdefault("effort", effort)
        else:
            warnings.append(
                f"{where}.model.parameters.reasoning: {effort!r} not used (jpd takes "
                "assistant.reasoning.effort = off|low|medium|high)"
            )


def _mcp(out: dict[str, Any], providers: dict[str, Any], warnings: list[str]) -> None:
    servers = providers.pop("mcp", None)
    if not isinstance(servers, dict):
        return
    target = out.setdefault("mcp", {}).setdefault("servers", {})
    for name, server in servers.items():
        where = f"providers.mcp.{name}"
        if not isinstance(server, dict):
            target[name] = server  # jpd's validation names the problem
            continue
        converted: dict[str, Any] = {}
        for key, value in server.items():
            if key == "type":
                if value != "stdio":
                    warnings.append(f"{where}.type: {value!r} unknown; read as stdio")
            elif key == "command" and isinstance(value, str):
                converted["command"] = [value, *server.get("arguments", [])]
            elif key == "arguments":
                continue
            elif key == "variables" and isinstance(value, list):
                env: dict[str, str] = {}
                for item in value:
                    variable, sep, text = str(item).partition("=")
                    if sep:
                        env[variable] = text
                    else:
                        # jpd never passes the daemon's variables to a server unasked.
                        warnings.append(
                            f"{where}.variables: {variable} not passed (give it as "
                            f"{variable}=VALUE)"
                        )
                if env:
                    converted["env"] = env
            elif key == "startup_timeout_secs" and isinstance(value, int):
                if value > 0:
                    converted["startup_timeout"] = float(value)
            elif key in ("checksum", "optional"):
                warnings.append(f"{where}.{key}: not used by jpd")
            else:
                converted[key] = value  # jpd's own keys, or an error naming the key
        target[name] = {**converted, **target.get(name, {})}


def _llm(out: dict[str, Any], providers: dict[str, Any], warnings: list[str]) -> None:
    llm = providers.pop("llm", None)
    if not isinstance(llm, dict):
        return
    for name, settings in llm.items():
        where = f"providers.llm.{name}"
        if name == "aliases" and isinstance(settings, dict):
            aliases = out.setdefault("aliases", {})
            for alias, model in settings.items():
                if isinstance(model, dict):
                    model = f"{model.get('provider')}/{model.get('name')}"
                aliases.setdefault(alias, model)
            continue
        keys = _JPD_PROVIDERS.get(name)
        if keys is None or not isinstance(settings, dict):
            warnings.append(f"{where}: provider not supported by jpd; ignored")
            continue
        target = providers.setdefault(name, {})
        for key, value in settings.items():
            if key in keys:
                target.setdefault(key, value)
            else:
                warnings.append(f"{where}.{key}: not used by jpd")


def _tool_modes(tool: dict[str, Any], where: str, warnings: list[str]) -> None:
    for key in ("run", "result"):
        if tool.get(key) == "edit":
            tool[key] = "ask"
            warnings.append(f"{where}.{key}: 'edit' read as 'ask' (jpd has no argument editor)")


def _drop(node: Any, pattern: list[str], path: tuple[str, ...], warnings: list[str]) -> None:
    if not isinstance(node, dict) or not pattern:
        return
    head, rest = pattern[0], pattern[1:]
    keys = list(node) if head == "*" else [head] if head in node else []
    for key in keys:
        if rest:
            _drop(node[key], rest, (*path, key), warnings)
        else:
            del node[key]
            warnings.append(f"{'.'.join((*path, key))}: a JP setting jpd does not use; ignored")
