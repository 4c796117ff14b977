"""`jp acp`: run_command's live output reaches the editor as tool-call content."""

from __future__ import annotations

from pathlib import Path

from acp import text_block
from acp.schema import ClientCapabilities

from tests.e2e.acp_client import Editor, acp_session, make_env
from tests.e2e.sockets import Daemons
from tests.e2e.tools import tool_call

COMMAND = "echo LIVE-1; echo LIVE-2 >&2"


def _env(tmp_path: Path, daemons: Daemons) -> dict[str, str]:
    env = make_env(tmp_path, daemons, [tool_call("run_command", command=COMMAND), {"text": "ok"}])
    config = Path(env["JP_CONFIG"])
    config.write_text(config.read_text() + '[conversation.tools.run_command]\nrun = "unattended"\n')
    return env


async def test_live_output_as_terminal_meta(tmp_path: Path, daemons: Daemons) -> None:
    editor = Editor()
    capabilities = ClientCapabilities.model_validate({"_meta": {"terminal_output": True}})
    async with acp_session(_env(tmp_path, daemons), editor, tmp_path, capabilities) as (
        conn,
        _,
        sid,
    ):
        answer = await conn.prompt(session_id=sid, prompt=[text_block("run")])
        assert answer.stop_reason == "end_turn"
    updates = editor.of_kind("tool_call_update")
    metas = [u.field_meta or {} for u in updates]
    data = "".join(m["terminal_output"]["data"] for m in metas if "terminal_output" in m)
    assert "LIVE-1" in data and "LIVE-2" in data
    assert any("terminal_info" in m for m in metas)
    [exit_meta] = [m["terminal_exit"] for m in metas if "terminal_exit" in m]
    assert exit_meta["exit_code"] == 0
    assert updates[-1].status == "completed"
    # The terminal stays when the command ends (not replaced by a text block).
    assert [c.type for c in updates[-1].content] == ["terminal"]


async def test_without_the_terminal_the_output_comes_once(tmp_path: Path, daemons: Daemons) -> None:
    editor = Editor()
    async with acp_session(_env(tmp_path, daemons), editor, tmp_path) as (conn, _, sid):
        answer = await conn.prompt(session_id=sid, prompt=[text_block("run")])
        assert answer.stop_reason == "end_turn"
    [started] = editor.of_kind("tool_call")
    assert started.title == COMMAND  # the command itself, whole
    [update] = editor.of_kind("tool_call_update")
    assert update.status == "completed"
    assert "LIVE-1" in update.content[0].content.text
