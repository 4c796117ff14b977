"""`jp acp` with the workspace tools: the editor (the `agent-client-protocol` client
side) sees each call's kind, locations and, for an edit, its diff, and approves it."""

from __future__ import annotations

from pathlib import Path

from acp import text_block
from acp.schema import FileEditToolCallContent

from tests.e2e.acp_client import Editor, acp_session, make_env
from tests.e2e.sockets import Daemons
from tests.e2e.tools import tool_call


async def test_editor_sees_kind_locations_and_diff(tmp_path: Path, daemons: Daemons) -> None:
    env = make_env(
        tmp_path,
        daemons,
        [
            tool_call("fs_read_file", "c1", path="calc.py", start_line=2),
            tool_call("fs_modify_file", "c2", path="calc.py", old_text="a - b", new_text="a + b"),
            {"text": "fixed"},
        ],
    )
    calc = tmp_path / "ws" / "calc.py"
    calc.write_text("def add(a, b):\n    return a - b\n")
    editor = Editor()
    async with acp_session(env, editor, tmp_path) as (conn, _, sid):
        answer = await conn.prompt(session_id=sid, prompt=[text_block("fix the bug")])
        assert answer.stop_reason == "end_turn"
    path = str(calc.resolve())
    read, edit = editor.of_kind("tool_call")
    assert (read.tool_call_id, read.kind, read.status) == ("c1", "read", "in_progress")
    assert [(loc.path, loc.line) for loc in read.locations] == [(path, 2)]
    assert (read.title, edit.title) == ("Read calc.py (from line 2)", "Edit calc.py")
    assert (edit.tool_call_id, edit.kind) == ("c2", "edit")
    # The location is the edited line; the diff is of the whole file.
    assert [(loc.path, loc.line) for loc in edit.locations] == [(path, 2)]
    [diff] = edit.content
    assert isinstance(diff, FileEditToolCallContent)
    before, after = "def add(a, b):\n    return a - b\n", "def add(a, b):\n    return a + b\n"
    assert (diff.path, diff.old_text, diff.new_text) == (path, before, after)
    # The editor was asked before the write: the request keeps the call's own title,
    # kind, locations and diff (Zed applies them to the call's entry).
    [(asked, _)] = editor.permissions
    assert (asked.tool_call_id, asked.title, asked.kind) == ("c2", "Edit calc.py", "edit")
    assert [(loc.path, loc.line) for loc in asked.locations or []] == [(path, 2)]
    assert [(d.old_text, d.new_text) for d in asked.content or []] == [(before, after)]
    done = {u.tool_call_id: u for u in editor.of_kind("tool_call_update") if u.status}
    assert done["c1"].status == "completed" and done["c1"].kind == "read"
    assert done["c2"].status == "completed" and done["c2"].kind == "edit"
    assert isinstance(done["c2"].content[0], FileEditToolCallContent)
    assert "+    return a + b" in done["c2"].content[1].content.text
    assert calc.read_text() == "def add(a, b):\n    return a + b\n"
