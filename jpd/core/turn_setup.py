"""From a turn's validated config to its `TurnSpec`: model settings and the first
model call's `tool_choice` (protocol.md section 8)."""

from __future__ import annotations

from jpd.config import Config
from jpd.context.setup import keeper_factory
from jpd.core.transcript import Transcript
from jpd.core.turn import TurnSpec
from jpd.llm.base import (
    TOOL_CHOICE_AUTO,
    Provider,
    ToolChoice,
    ToolChoiceAny,
    ToolChoiceNone,
    ToolChoiceTool,
    ToolDefinition,
)
from jpd.llm.registry import ProviderSource
from jpd.protocol.errors import ConfigInvalid
from jpd.tools.base import ToolRunner


def turn_spec(
    cfg: Config,
    *,
    conversation_id: str,
    turn_id: str,
    message: str,
    provider: Provider,
    tools: ToolRunner,
    transcript: Transcript,
    workspace: str | None,
    providers: ProviderSource | None = None,
) -> TurnSpec:
    """Everything the turn loop needs, read from `cfg`; raises `ConfigInvalid`."""
    params = cfg.assistant.model.parameters
    return TurnSpec(
        conversation_id=conversation_id,
        turn_id=turn_id,
        message=message,
        model_id=cfg.assistant.model.id,
        provider=provider,
        tools=tools,
        transcript=transcript,
        system=cfg.assistant.system_prompt,
        max_tokens=params.max_tokens,
        temperature=params.temperature,
        reasoning_effort=cfg.assistant.reasoning.effort,
        reasoning_budget=cfg.assistant.reasoning.budget_tokens,
        first_tool_choice=tool_choice(cfg.assistant.tool_choice, tools.definitions()),
        workspace=workspace,
        price=cfg.prices.get(cfg.assistant.model.id),
        context=keeper_factory(cfg, provider, providers or _Only(provider)),
    )


class _Only:
    """Providers for a caller without a registry: the turn's own for every model."""

    def __init__(self, provider: Provider) -> None:
        self._provider = provider

    def get(self, config: Config) -> Provider:
        return self._provider


def tool_choice(value: str, tools: tuple[ToolDefinition, ...]) -> ToolChoice:
    """Read `assistant.tool_choice`; a tool name must be one of the turn's tools."""
    if value == "auto":
        return TOOL_CHOICE_AUTO
    if value == "none":
        return ToolChoiceNone()
    names = [t.name for t in tools]
    if value == "any":
        if not names:
            raise ConfigInvalid('assistant.tool_choice: "any" needs at least one enabled tool')
        return ToolChoiceAny()
    if value not in names:
        raise ConfigInvalid(
            f"assistant.tool_choice: {value!r} is not an enabled tool in this turn "
            f"(enabled: {', '.join(names) or 'none'})"
        )
    return ToolChoiceTool(name=value)
