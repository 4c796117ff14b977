"""What an editor (Zed) shows of `jp acp`'s tool calls, driven by the official SDK's
client side: titles as people write them, permission requests that keep the call's
own title, kind, locations and diff, statuses that always end, ids unique within a
session, whole-file diffs in additional directories, the `usage` field only when
declared, and the session title sent only when it changes."""

from __future__ import annotations

import asyncio
from pathlib import Path

from acp import text_block
from acp.schema import (
    ClientCapabilities,
    FileEditToolCallContent,
    PermissionOption,
    ToolCallUpdate,
)

from tests.e2e.acp_client import Editor, jp_acp, make_env
from tests.e2e.sockets import Daemons
from tests.e2e.tools import tool_call

LONG = "python -c 'print(\"checking the calculator module thoroughly\")' && echo done-with-checks"
CAPS = ClientCapabilities.model_validate({"_meta": {"usage": True}})


async def test_titles_permissions_statuses_ids_and_diffs(tmp_path: Path, daemons: Daemons) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    lib = extra / "lib.py"
    lib.write_text("X = 1\nY = 2\n")
    env = make_env(
        tmp_path,
        daemons,
        [
            {
                "tool_calls": [
                    {
                        "id": "call_1",
                        "name": "fs_read_file",
                        "arguments": {"path": "src/calc.py", "start_line": 1, "end_line": 2},
                    },
                    {
                        "id": "call_2",
                        "name": "fs_grep_files",
                        "arguments": {"pattern": "def add", "path": "src"},
                    },
                ]
            },
            tool_call("run_command", "call_3", command=LONG),
            {"text": "checked", "usage": {"input_tokens": 3, "output_tokens": 2}},
            # The provider numbers calls per response: `call_1` again in the next turn.
            tool_call(
                "fs_modify_file", "call_1", path=str(lib), old_text="Y = 2", new_text="Y = 3"
            ),
            {"text": "edited"},
        ],
    )
    ws = tmp_path / "ws"
    (ws / "src").mkdir()
    (ws / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    editor = Editor()
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, _):
        await conn.initialize(protocol_version=1, client_capabilities=CAPS)
        new = await conn.new_session(
            cwd=str(ws), mcp_servers=[], additional_directories=[str(extra)]
        )
        sid = new.session_id
        first = await conn.prompt(session_id=sid, prompt=[text_block("check calc")])
        assert first.stop_reason == "end_turn"
        # Declared `_meta.usage`: the unstable field is sent.
        assert first.usage is not None and first.usage.output_tokens == 2
        second = await conn.prompt(session_id=sid, prompt=[text_block("edit lib")])
        assert second.stop_reason == "end_turn"

    starts = editor.of_kind("tool_call")
    assert [(s.tool_call_id, s.title, s.kind) for s in starts] == [
        ("call_1", "Read src/calc.py (1-2)", "read"),
        ("call_2", 'Search "def add" in src', "search"),
        ("call_3", LONG, "execute"),  # the command itself, whole
        ("call_1~2", f"Edit {lib.resolve()}", "edit"),
    ]
    read = starts[0]
    assert [(loc.path, loc.line) for loc in read.locations] == [(str(ws / "src" / "calc.py"), 1)]

    # The permission requests keep each call's own view: the full command, the edit's
    # whole-file diff and edited line, in the additional directory.
    run, edit = editor.permissions
    assert (run[0].tool_call_id, run[0].title, run[0].kind) == ("call_3", LONG, "execute")
    asked = edit[0]
    assert (asked.tool_call_id, asked.title, asked.kind) == ("call_1~2", starts[3].title, "edit")
    assert [(loc.path, loc.line) for loc in asked.locations or []] == [(str(lib.resolve()), 2)]
    [diff] = asked.content or []
    assert isinstance(diff, FileEditToolCallContent)
    assert (diff.old_text, diff.new_text) == ("X = 1\nY = 2\n", "X = 1\nY = 3\n")
    assert lib.read_text() == "X = 1\nY = 3\n"

    # After approval the call is in progress again, then ends; every call ends.
    statuses: dict[str, list[str]] = {}
    for update in editor.of_kind("tool_call_update"):
        if update.status:
            statuses.setdefault(update.tool_call_id, []).append(update.status)
    assert statuses == {
        "call_1": ["completed"],
        "call_2": ["completed"],
        "call_3": ["in_progress", "completed"],
        "call_1~2": ["in_progress", "completed"],
    }
    # The title went once: it did not change with the second prompt.
    assert len(editor.of_kind("session_info_update")) == 1


async def test_a_cancelled_turn_ends_its_calls_before_the_prompt_returns(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = make_env(tmp_path, daemons, [tool_call("run_command", "c1", command="sleep 30")])
    config = Path(env["JP_CONFIG"])
    config.write_text(config.read_text() + '[conversation.tools.run_command]\nrun = "unattended"\n')
    editor = Editor()
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, _):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(tmp_path / "ws"), mcp_servers=[])).session_id
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("wait")]))
        await editor.wait_for(lambda: bool(editor.of_kind("tool_call")), "the call")
        await conn.cancel(session_id=sid)
        answer = await asyncio.wait_for(prompt, 60)
        assert answer.stop_reason == "cancelled"
        assert answer.usage is None  # not declared: the unstable field is not sent
        # Already there when the prompt returned: the call ended as failed.
        ends = [u.status for u in editor.of_kind("tool_call_update") if u.status]
        assert ends and ends[-1] == "failed"


async def test_resume_picks_again_what_the_conversation_ran_with(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = make_env(tmp_path, daemons, [{"text": "ok"}] * 2)
    ws = str(tmp_path / "ws")
    async with jp_acp(env, Editor(), tmp_path / "acp.log") as (conn, _):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=ws, mcp_servers=[])).session_id
        await conn.set_config_option(config_id="mode", session_id=sid, value="read-only")
        await conn.prompt(session_id=sid, prompt=[text_block("hi")])
    async with jp_acp(env, Editor(), tmp_path / "acp2.log") as (conn, _):
        await conn.initialize(protocol_version=1)
        resumed = await conn.resume_session(cwd=ws, session_id=sid, mcp_servers=[])
        current = {o.id: o.current_value for o in resumed.config_options or []}  # type: ignore[union-attr]
        assert current["mode"] == "read-only"
        assert resumed.modes is not None and resumed.modes.current_mode_id == "read-only"


async def test_a_question_of_no_shown_call_is_an_entry_that_ends(
    tmp_path: Path, daemons: Daemons
) -> None:
    ask = tool_call("ask_user", "call_1", question="Proceed?", answer_type="boolean")
    env = make_env(tmp_path, daemons, [ask, {"text": "done"}])
    editor = Editor()

    async def yes(asked: ToolCallUpdate, options: list[PermissionOption]) -> str:
        return "yes"

    editor.choose = yes
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, process):
        await conn.initialize(protocol_version=1)  # no forms: a permission request
        sid = (await conn.new_session(cwd=str(tmp_path / "ws"), mcp_servers=[])).session_id
        # An editor's `$/cancel_request` for nothing in flight is ignored, quietly.
        assert process.stdin is not None
        process.stdin.write(
            b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":9}}\n'
        )
        answer = await conn.prompt(session_id=sid, prompt=[text_block("ask")])
        assert answer.stop_reason == "end_turn"
    [(asked, _)] = editor.permissions
    assert asked.title is not None and "Proceed?" in asked.title
    ends = [u for u in editor.of_kind("tool_call_update") if u.tool_call_id == asked.tool_call_id]
    assert [u.status for u in ends] == ["completed"]  # the entry it made is finished
    assert "Traceback" not in (tmp_path / "acp.log").read_text()
