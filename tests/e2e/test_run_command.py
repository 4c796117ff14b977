"""`run_command` through the real daemon: sandboxed, with its output live to clients."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import StartJpd
from tests.e2e.tools import tool_call as call

CONFIG = '[conversation.tools.run_command]\nrun = "unattended"\n'


async def test_run_command_sandboxed_with_live_output(
    jpd_factory: StartJpd, home: Path, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = tmp_path / "outside.txt"
    command = f"echo LIVE-OUT; echo ok > inside.txt; echo no > {outside}; exit 4"
    daemon = await jpd_factory(
        responses=[call("run_command", command=command), {"text": "done"}], config=CONFIG
    )
    await daemon.initialize(workspaceRoot=str(workspace))
    _, events = await daemon.run_turn("run it")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    kinds = [e["event"] for e in events]
    [result] = [e for e in kinds if e["kind"] == "tool_result"]
    assert result["content"].startswith("exit code: 4")
    assert "LIVE-OUT" in result["content"]
    assert (workspace / "inside.txt").read_text() == "ok\n"
    assert not outside.exists()
    # The refused write is explained: it was the sandbox, and which setting lifts it.
    assert "note: the command ran in jpd's sandbox" in result["content"]
    assert 'conversation.tools.run_command.options.sandbox = "off"' in result["content"]
    progress = [e for e in kinds if e["kind"] == "tool_progress" and e["id"] == "call_1"]
    assert "LIVE-OUT" in "".join(e.get("message") or "" for e in progress)
