"""A turn's tools are offered from the catalog; the machinery that runs them (router,
inquiry backends, permissions, local and MCP runners) is built on the first tool call
(`jpd.tools.deferred`), so a turn answered in text never loads it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio

from jpd.config.tools import ToolConfig
from jpd.inquiry.answer_tool import ANSWER_INQUIRY_TOOL
from jpd.llm.base import ToolCallPart
from jpd.tools.base import ResultCallback, ToolResultData
from jpd.tools.catalog import EffectiveTool
from jpd.tools.deferred import DeferredRunner
from tests.unit.one_text_turn import modules_after_one_text_turn


def tool(name: str, *, enabled: bool = True, hidden: bool = False) -> EffectiveTool:
    config = ToolConfig.model_validate(
        {"description": f"the {name} tool", "style": {"hidden": hidden}}
    )
    return EffectiveTool(
        name=name,
        source="local",
        config=config,
        enabled=enabled,
        schema={"type": "object"},
        builtin=None,
    )


class Runner:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def run(
        self, calls: Sequence[ToolCallPart], on_result: ResultCallback | None = None
    ) -> list[ToolResultData]:
        self.calls.append([c.id for c in calls])
        return [ToolResultData(id=c.id, content="ran", is_error=False) for c in calls]


def test_offers_and_styles_come_from_the_catalog_without_building() -> None:
    built: list[Runner] = []
    tools = {
        "b": tool("b", hidden=True),
        "a": tool("a"),
        "off": tool("off", enabled=False),
    }
    deferred = DeferredRunner(tools, lambda: built.append(Runner()) or built[-1])
    offered = deferred.definitions()
    assert [d.name for d in offered] == ["a", "b", ANSWER_INQUIRY_TOOL.name]
    assert deferred.hidden("b") and not deferred.hidden("a") and not deferred.hidden("nope")
    assert DeferredRunner({"off": tools["off"]}, Runner).definitions() == ()
    assert built == []


def test_the_runner_is_built_once_on_the_first_calls() -> None:
    built: list[Runner] = []

    def build() -> Runner:
        built.append(Runner())
        return built[-1]

    deferred = DeferredRunner({"a": tool("a")}, build)
    call = ToolCallPart(id="1", name="a", arguments={})

    async def main() -> None:
        first = await deferred.run([call])
        second = await deferred.run([call.model_copy(update={"id": "2"})])
        assert [r.id for r in first + second] == ["1", "2"]

    anyio.run(main)
    assert len(built) == 1 and built[0].calls == [["1"], ["2"]]


# Loaded with a turn's first tool call, never for a turn answered in text.
FOR_TOOL_CALLS = (
    "jpd.tools.coordinator",
    "jpd.tools.local_runner",
    "jpd.tools.mcp_call",
    "jpd.tools.permissions",
    "jpd.inquiry.router",
    "jpd.inquiry.backend",
    "jpd.mcp.model",
    "jpd.mcp.manager",
)


def test_a_turn_answered_in_text_loads_no_tool_running_machinery(tmp_path: Path) -> None:
    report, loaded = modules_after_one_text_turn(tmp_path)
    assert report["completed"], report["tail"]
    assert "jpd.tools.deferred" in loaded and "jpd.core.turn" in loaded
    assert [m for m in FOR_TOOL_CALLS if m in loaded] == []
