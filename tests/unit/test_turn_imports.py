"""A plain turn (no attachments, no tool call) loads only what it uses: the readers of
attachments (`html.parser` for web pages, globbing, fetching) load with the first
turn that has some (protocol.md section 4, "Start-up": everything else loads when first
used). A fresh interpreter serves `initialize` and one scripted turn in-process, then
reports `sys.modules`."""

from __future__ import annotations

from pathlib import Path

from tests.unit.one_text_turn import modules_after_one_text_turn

# Loaded by the first turn that has attachments (or fetches a web page), not before.
NOT_FOR_A_PLAIN_TURN = ("html", "jpd.core.attachments", "jpd.core.html_text")


def test_a_plain_turn_loads_no_attachment_reader(tmp_path: Path) -> None:
    report, loaded = modules_after_one_text_turn(tmp_path)
    assert report["completed"] and report["endTurn"], report["tail"]
    assert "jpd.core.turn" in loaded  # the turn did run here
    crept = [
        m for m in loaded if any(m == p or m.startswith(p + ".") for p in NOT_FOR_A_PLAIN_TURN)
    ]
    assert crept == [], f"loaded by a turn without attachments: {crept}"


# What runs a built-in tool loads with its first call: the registry (built by every
# turn) imports the tools' modules, which import these only where a call needs them.
NOT_UNTIL_A_TOOL_RUNS = (
    "jpd.tools.sandbox",
    "jpd.tools.output_cap",
    "jpd.tools.changes",
    "jpd.tools.protected",
)


def test_a_plain_turn_loads_no_tool_running_machinery(tmp_path: Path) -> None:
    report, loaded = modules_after_one_text_turn(tmp_path)
    assert report["completed"] and report["endTurn"], report["tail"]
    assert "jpd.tools.builtin.run_command" in loaded  # the registry was built
    crept = [m for m in loaded if m in NOT_UNTIL_A_TOOL_RUNS]
    assert crept == [], f"loaded by a turn that ran no tool: {crept}"


# Loaded by the first compaction (planning a cut, writing a summary) or `turn/resume`.
NOT_UNTIL_COMPACTION_OR_RESUME = (
    "jpd.context.plan",
    "jpd.context.summary",
    "jpd.conversation.resume",
)


def test_a_plain_turn_loads_no_compaction_or_resume(tmp_path: Path) -> None:
    report, loaded = modules_after_one_text_turn(tmp_path)
    assert report["completed"] and report["endTurn"], report["tail"]
    assert "jpd.context.keeper" in loaded  # the turn's context was kept
    crept = [m for m in loaded if m in NOT_UNTIL_COMPACTION_OR_RESUME]
    assert crept == [], f"loaded by a turn that neither compacted nor resumed: {crept}"
