"""The file snapshots of a turn cut by a crash are in the store: a member that takes the
turn over undoes its file changes (`turn/undo`), though the member that made them died;
also the change of the tool the crash cut, whose snapshot is shared before it writes."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

from tests.e2e.sockets import Daemons, add_config, wait_for
from tests.e2e.tools import tool_call
from tests.fleet.test_takeover import kill_runs, member, start, stored


async def no_turn_running(client: Any) -> None:
    """Wait until `client`'s member lists no running turn."""
    for _ in range(1000):
        listed = (await client.request("turn/list"))["turns"]
        if not [t for t in listed if not t.get("resumable")]:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("a turn still runs")


async def test_a_taken_over_turn_is_undone_on_the_member_that_finished_it(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    edit = tool_call("fs_modify_file", path="calc.py", old_text="a - b", new_text="a + b")
    env_a = member(tmp_path / "a", pg_url, [edit, tool_call("slow", call_id="call_2")], host="h")
    env_b = member(tmp_path / "b", pg_url, [{"text": "Done on B."}], host="h")
    for env in (env_a, env_b):
        add_config(env, '[conversation.tools.fs_modify_file]\nrun = "unattended"\n')
    daemon_a, client_a = await start(daemons, env_a, workspaceRoot=str(workspace))
    _, client_b = await start(daemons, env_b)
    try:
        started = await client_a.request("turn/start", {"message": "fix it, then wait"})
        cid, turn = started["conversationId"], started["turnId"]
        await wait_for((workspace / "runs").exists, "the slow tool to run")
        assert "a + b" in (workspace / "calc.py").read_text()
        daemon_a.process.send_signal(signal.SIGKILL)
        await daemon_a.wait_exit()

        def finished() -> bool:
            events = [e for _, e in stored(pg_url, cid)]
            return bool(events) and events[-1].get("stop_reason") == "end_turn"

        await wait_for(finished, "B to finish the turn")
        await no_turn_running(client_b)  # its end is stored before B lets the turn go
        undone = await client_b.request("turn/undo", {"conversationId": cid, "turnId": turn})
        assert [Path(p).name for p in undone["restored"]] == ["calc.py"]
        assert (workspace / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
    finally:
        kill_runs(workspace)
        await client_a.close()
        await client_b.close()


async def test_the_change_of_a_tool_cut_after_it_wrote_is_undone_on_the_member_that_took_over(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    """The edit is written, then its result waits for a permission (`result = "ask"`),
    so the tool call is still open (no result, no later tool, no turn end) when A is
    killed: only the snapshot shared before the write lets B undo it."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    edit = tool_call("fs_modify_file", path="calc.py", old_text="a - b", new_text="a + b")
    env_a = member(tmp_path / "a", pg_url, [edit], host="h")
    env_b = member(tmp_path / "b", pg_url, [{"text": "Done on B."}], host="h")
    for env in (env_a, env_b):
        add_config(env, '[conversation.tools.fs_modify_file]\nrun = "unattended"\nresult = "ask"\n')
    daemon_a, client_a = await start(daemons, env_a, workspaceRoot=str(workspace))
    _, client_b = await start(daemons, env_b)
    try:
        started = await client_a.request("turn/start", {"message": "fix it", "detached": "defer"})
        cid, turn = started["conversationId"], started["turnId"]

        def changed() -> bool:
            return any(e["type"] == "file_changed" for _, e in stored(pg_url, cid))

        await wait_for(changed, "the edit to be stored")
        assert "a + b" in (workspace / "calc.py").read_text()
        # The permission for the result is asked after the change is stored.
        inquiries: list[dict[str, Any]] = []
        for _ in range(1000):
            inquiries = (await client_a.request("inquiry/list"))["inquiries"]
            if inquiries:
                break
            await asyncio.sleep(0.02)
        assert inquiries and inquiries[0]["kind"] == "permission"
        daemon_a.process.send_signal(signal.SIGKILL)
        await daemon_a.wait_exit()

        def finished() -> bool:
            events = [e for _, e in stored(pg_url, cid)]
            return bool(events) and events[-1].get("stop_reason") == "end_turn"

        await wait_for(finished, "B to finish the turn")
        events = [e for _, e in stored(pg_url, cid)]
        cut = [e for e in events if e["type"] == "tool_call_response"]
        assert cut and cut[0].get("interrupted"), "the cut edit is reported interrupted"
        undone = await client_b.request("turn/undo", {"conversationId": cid, "turnId": turn})
        assert [Path(p).name for p in undone["restored"]] == ["calc.py"]
        assert (workspace / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
    finally:
        await client_a.close()
        await client_b.close()
