"""A plain turn (no attachments, no tool call) loads only what it uses: the readers of
attachments (`html.parser` for web pages, globbing, fetching) load with the first
turn that has some (protocol.md section 4, "Start-up": everything else loads when first
used). A fresh interpreter serves `initialize` and one scripted turn in-process, then
reports `sys.modules`."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.one_text_turn import modules_after_one_text_turn

Turn = tuple[dict[str, Any], list[str]]


@pytest.fixture(scope="module")
def plain_turn(tmp_path_factory: pytest.TempPathFactory) -> Turn:
    """One plain turn in a fresh interpreter, shared by this module's tests (each
    looks for another kind of module); its report and the modules it left loaded."""
    report, loaded = modules_after_one_text_turn(tmp_path_factory.mktemp("turn"))
    assert report["completed"] and report["endTurn"], report["tail"]
    return report, loaded


def crept(loaded: list[str], names: tuple[str, ...]) -> list[str]:
    """The loaded modules that are one of `names` or inside one of them."""
    return [m for m in loaded if any(m == p or m.startswith(p + ".") for p in names)]


# Loaded by the first turn that has attachments (or fetches a web page), not before.
NOT_FOR_A_PLAIN_TURN = ("html", "jpd.core.attachments", "jpd.core.html_text")


def test_a_plain_turn_loads_no_attachment_reader(plain_turn: Turn) -> None:
    _, loaded = plain_turn
    assert "jpd.core.turn" in loaded  # the turn did run here
    found = crept(loaded, NOT_FOR_A_PLAIN_TURN)
    assert found == [], f"loaded by a turn without attachments: {found}"


# What runs a built-in tool loads with its first call: the registry (built by every
# turn) imports the tools' modules, which import these only where a call needs them.
NOT_UNTIL_A_TOOL_RUNS = (
    "jpd.tools.sandbox",
    "jpd.tools.output_cap",
    "jpd.tools.changes",
    "jpd.tools.protected",
)


def test_a_plain_turn_loads_no_tool_running_machinery(plain_turn: Turn) -> None:
    _, loaded = plain_turn
    assert "jpd.tools.builtin.run_command" in loaded  # the registry was built
    found = crept(loaded, NOT_UNTIL_A_TOOL_RUNS)
    assert found == [], f"loaded by a turn that ran no tool: {found}"


# Loaded by the first compaction (planning a cut, writing a summary) or `turn/resume`.
NOT_UNTIL_COMPACTION_OR_RESUME = (
    "jpd.context.plan",
    "jpd.context.summary",
    "jpd.conversation.resume",
)


def test_a_plain_turn_loads_no_compaction_or_resume(plain_turn: Turn) -> None:
    _, loaded = plain_turn
    assert "jpd.context.keeper" in loaded  # the turn's context was kept
    found = crept(loaded, NOT_UNTIL_COMPACTION_OR_RESUME)
    assert found == [], f"loaded by a turn that neither compacted nor resumed: {found}"
