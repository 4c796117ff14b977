"""A turn's tools, with the machinery that runs them built on the first tool call.

What the model is offered, and which calls clients need not show, come from the
catalog alone. Running a call needs the coordinator: the inquiry router and its
backends, the permission gate, the local and MCP runners. Most turns answer in text,
so those are loaded and assembled only when the model first calls a tool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from jpd.llm.base import ToolCallPart, ToolDefinition
from jpd.tools.base import CallRunner, ResultCallback, ToolResultData
from jpd.tools.catalog import EffectiveTool, is_hidden, offered_definitions


class DeferredRunner:
    """Implements `ToolRunner` over `tools`; `build()` makes the runner of the calls
    (the coordinator), once, when the first calls arrive."""

    def __init__(self, tools: Mapping[str, EffectiveTool], build: Callable[[], CallRunner]) -> None:
        self._tools = tools
        self._build = build
        self._runner: CallRunner | None = None

    def definitions(self) -> tuple[ToolDefinition, ...]:
        """The tools offered to the model (`offered_definitions`)."""
        return offered_definitions(self._tools)

    def hidden(self, name: str) -> bool:
        """`style.hidden` of the named tool (unknown tools are shown)."""
        return is_hidden(self._tools, name)

    async def run(
        self, calls: Sequence[ToolCallPart], on_result: ResultCallback | None = None
    ) -> list[ToolResultData]:
        """Run `calls` with the runner, built now if this is the turn's first call."""
        if self._runner is None:
            self._runner = self._build()
        return await self._runner.run(calls, on_result)
