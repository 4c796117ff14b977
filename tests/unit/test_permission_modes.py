"""Permission modes (protocol.md 5.5.1) in the daemon's gate: what each mode lets run
without asking, what it refuses whatever the config, and that the mode is recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jpd.conversation import events as ev
from jpd.conversation.resume import plan_resume
from jpd.core.turn_tools import make_coordinator
from jpd.protocol.modes import PermissionMode
from jpd.protocol.turn_requests import TurnStartParams
from jpd.tools.coordinator import Coordinator
from tests.unit.fakes import Clients, FakeBackend, FakeLink, FakeLog, replies
from tests.unit.test_coordinator import Asker, call, effective

EDIT, COMMAND, READ, MCP = "fs_modify_file", "run_command", "fs_read_file", "srv__tool"


def coordinator(
    mode: PermissionMode, *links: FakeLink, **config: Any
) -> tuple[Coordinator, dict[str, Asker]]:
    tools = {name: Asker(name, []) for name in (EDIT, COMMAND, READ, MCP)}
    built = make_coordinator(
        tools={name: effective(tool, **config) for name, tool in tools.items()},
        pending=Clients(list(links)).pending(),
        log=FakeLog(),
        backend=FakeBackend("model says"),
        conversation_id="c",
        turn_id="t",
        root=Path("/"),
        env={},
        detached="deny",  # nobody to ask: an "ask" that reaches the gate is refused
        mode=mode,
    )
    return built, tools


async def outcomes(coord: Coordinator) -> dict[str, bool]:
    """Tool name -> whether the call ran (no error)."""
    return {name: not (await coord.run_one(call(name)))[1] for name in (EDIT, COMMAND, READ, MCP)}


async def test_ask_asks_for_everything_configured_ask() -> None:
    coord, tools = coordinator("ask", run="ask")
    assert await outcomes(coord) == {EDIT: False, COMMAND: False, READ: False, MCP: False}
    assert all(t.runs == [] for t in tools.values())


async def test_accept_edits_runs_edits_unasked_and_still_asks_for_commands() -> None:
    coord, tools = coordinator("accept-edits", run="ask")
    assert await outcomes(coord) == {EDIT: True, COMMAND: False, READ: False, MCP: False}
    assert tools[COMMAND].runs == []


async def test_accept_edits_asks_a_client_for_a_command() -> None:
    link = FakeLink(1, answer=replies({"allow": False, "remember": False}))
    coord, _ = coordinator("accept-edits", link, run="ask")
    content, is_error = await coord.run_one(call(COMMAND))
    assert is_error and "denied by the user" in content
    assert [m for m, _ in link.requests] == ["tool/permission"]


async def test_auto_runs_everything_without_asking_and_delivers_results() -> None:
    link = FakeLink(1, answer=replies())  # asking it would fail the test
    coord, _ = coordinator("auto", link, run="ask", result="ask")
    assert await outcomes(coord) == {EDIT: True, COMMAND: True, READ: True, MCP: True}
    assert link.requests == []


async def test_auto_keeps_run_skip() -> None:
    coord, tools = coordinator("auto", run="skip")
    content, is_error = await coord.run_one(call(EDIT))
    assert is_error and "run = skip" in content and tools[EDIT].runs == []


async def test_read_only_refuses_edits_and_commands_even_when_configured_unattended() -> None:
    coord, tools = coordinator("read-only", run="unattended")
    assert await outcomes(coord) == {EDIT: False, COMMAND: False, READ: True, MCP: True}
    assert tools[EDIT].runs == [] and tools[COMMAND].runs == []
    content, _ = await coord.run_one(call(EDIT))
    assert "permission mode 'read-only'" in content


def test_turn_start_takes_a_mode_and_refuses_an_unknown_one() -> None:
    assert TurnStartParams.model_validate({"message": "hi"}).mode == "ask"
    assert TurnStartParams.model_validate({"message": "hi", "mode": "auto"}).mode == "auto"
    with pytest.raises(ValueError, match="mode"):
        TurnStartParams.model_validate({"message": "hi", "mode": "yolo"})


def test_the_mode_is_recorded_with_the_turn_and_kept_by_a_resume() -> None:
    start = ev.TurnStart(turn_id="t-1", model="m", mode="read-only")
    again = ev.TurnStart.model_validate_json(start.model_dump_json())
    assert again.mode == "read-only"
    old = ev.TurnStart.model_validate({"type": "turn_start", "turn_id": "t-0"})
    assert old.mode == "ask"  # logs written before modes existed
    end = ev.TurnEnd(turn_id="t-1", stop_reason="interrupted")
    assert plan_resume([again, ev.ChatRequest(content="x"), end], "t-1").mode == "read-only"
