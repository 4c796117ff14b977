"""`jp acp` asking the editor: permission requests, forms for questions, secrets kept
out of forms, the permission fallback without forms, and the editor's MCP servers."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from acp import text_block
from acp.schema import (
    DeclineElicitationResponse,
    EnvVariable,
    McpServerStdio,
    PermissionOption,
    ToolCallUpdate,
)

from tests.e2e.acp_client import (
    ASKER,
    DEPLOY,
    ENV_ARG,
    FORMS,
    KIND_ARG,
    MCP_SERVER,
    Editor,
    accept,
    acp_session,
    jp_acp,
    make_env,
)
from tests.e2e.sockets import Daemons, persisted, run_jp, run_jp_async
from tests.e2e.tools import add_tool, tool_call


async def test_the_editors_mcp_servers_serve_the_sessions_turns(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = make_env(tmp_path, daemons, [tool_call("echo", "c1", text="hi"), {"text": "done"}])
    editor = Editor()
    server = McpServerStdio(
        name="fixture",
        command=sys.executable,
        args=[str(MCP_SERVER)],
        env=[EnvVariable(name="NOTE", value="from-the-editor")],
    )
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, _):
        init = await conn.initialize(protocol_version=1)
        assert init.agent_capabilities is not None
        assert init.agent_capabilities.mcp_capabilities is not None
        assert init.agent_capabilities.mcp_capabilities.http
        sid = (await conn.new_session(cwd=str(tmp_path / "ws"), mcp_servers=[server])).session_id
        answer = await conn.prompt(session_id=sid, prompt=[text_block("echo")])
        assert answer.stop_reason == "end_turn"
    assert editor.permissions[0][0].tool_call_id == "c1"  # MCP tools ask to run by default
    ended = editor.of_kind("tool_call_update")[-1]
    assert (ended.status, ended.content[0].content.text) == ("completed", "echo:hi:from-the-editor")


async def test_permission_round_trip_and_always(tmp_path: Path, daemons: Daemons) -> None:
    env = make_env(
        tmp_path,
        daemons,
        [
            tool_call("deploy", "call_1", env="prod"),
            tool_call("deploy", "call_2", env="dev"),
            {"text": "ok"},
            tool_call("deploy", "call_3", env="qa"),
            {"text": "ok again"},
        ],
    )
    add_tool(env, "deploy", DEPLOY, run='"ask"', **ENV_ARG)
    editor = Editor()

    async def always(asked: ToolCallUpdate, options: list[PermissionOption]) -> str:
        return "allow_always"

    editor.choose = always
    async with acp_session(env, editor, tmp_path) as (conn, _, sid):
        answer = await conn.prompt(session_id=sid, prompt=[text_block("deploy twice")])
        assert answer.stop_reason == "end_turn"
        # The next turn of the session: "always" was for this tool in this session.
        answer = await conn.prompt(session_id=sid, prompt=[text_block("deploy again")])
        assert answer.stop_reason == "end_turn"

    # Asked once: "always" is remembered by the session for this tool.
    assert len(editor.permissions) == 1
    asked, options = editor.permissions[0]
    assert asked.tool_call_id == "call_1" and asked.raw_input == {"env": "prod"}
    assert [o.kind for o in options] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]
    assert options[1].name == "Always allow deploy in this session"
    assert options[3].name == "Always reject deploy in this session"
    starts = editor.of_kind("tool_call")
    assert [(s.tool_call_id, s.title, s.status) for s in starts] == [
        ("call_1", 'deploy(env="prod")', "in_progress"),
        ("call_2", 'deploy(env="dev")', "in_progress"),
        ("call_3", 'deploy(env="qa")', "in_progress"),
    ]
    ends = [u for u in editor.of_kind("tool_call_update") if u.status != "in_progress"]
    assert [(e.tool_call_id, e.status, e.content[0].content.text) for e in ends] == [
        ("call_1", "completed", "deployed prod"),
        ("call_2", "completed", "deployed dev"),
        ("call_3", "completed", "deployed qa"),
    ]


async def test_permission_answered_at_a_terminal_closes_the_editors(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = make_env(tmp_path, daemons, [tool_call("deploy", "call_1", env="prod"), {"text": "ok"}])
    add_tool(env, "deploy", DEPLOY, run='"ask"', **ENV_ARG)
    editor = Editor()
    never = asyncio.Event()

    async def wait_forever(asked: ToolCallUpdate, options: list[PermissionOption]) -> str:
        await never.wait()
        return "reject_once"

    editor.choose = wait_forever
    async with acp_session(env, editor, tmp_path) as (conn, _, sid):
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("go")]))
        await editor.wait_for(lambda: bool(editor.permissions), "the permission request")
        answered = await run_jp_async(env, "inquiry", "answer", "call_1.permission.run", "true")
        assert answered.returncode == 0, answered.stderr
        assert (await asyncio.wait_for(prompt, 30)).stop_reason == "end_turn"
        never.set()
    texts = [u.content[0].content.text for u in editor.of_kind("tool_call_update") if u.content]
    assert texts == ["Answered elsewhere.", "deployed prod"]


async def test_ask_user_through_a_form(tmp_path: Path, daemons: Daemons) -> None:
    ask = tool_call(
        "ask_user",
        "call_1",
        question="Which branch?",
        answer_type="select",
        options=["main", "dev"],
    )
    again = tool_call("ask_user", "call_2", question="Really?", answer_type="boolean")
    env = make_env(tmp_path, daemons, [ask, again, {"text": "done"}])
    editor = Editor()
    answers: list[Any] = [accept("dev"), None]  # then: decline

    async def fill(message: str, mode: Any) -> Any:
        filler = answers.pop(0)
        if filler is None:
            return DeclineElicitationResponse(action="decline")
        return await filler(message, mode)

    editor.fill = fill
    async with acp_session(env, editor, tmp_path, FORMS) as (conn, _, sid):
        answer = await conn.prompt(session_id=sid, prompt=[text_block("ask me")])
        assert answer.stop_reason == "end_turn"

    message, mode = editor.forms[0]
    assert message == "Assistant asks:\n\nWhich branch?"
    assert mode.session_id == sid
    schema = mode.requested_schema
    assert schema.properties["answer"].enum == ["main", "dev"]
    assert "remember" not in schema.properties  # ask_user's questions are never remembered
    assert schema.properties["answer"].type == "string"
    assert editor.forms[1][1].requested_schema.properties["answer"].type == "boolean"
    assert editor.of_kind("tool_call") == []  # ask_user is hidden, as in `jp`
    inquiries = [e for e in persisted(env, sid) if e["type"] == "inquiry_response"]
    assert [(e["outcome"], e.get("answer"), e.get("reason")) for e in inquiries] == [
        ("answered", "dev", None),
        ("cancelled", None, "user"),
    ]


async def test_number_and_multi_select_forms(tmp_path: Path, daemons: Daemons) -> None:
    calls = [tool_call("asker", "c1", kind="number"), tool_call("asker", "c2", kind="multi_select")]
    env = make_env(tmp_path, daemons, [*calls, {"text": "done"}])
    add_tool(env, "asker", ASKER, run='"unattended"', **KIND_ARG)
    editor = Editor()
    answers = [accept(7), accept(["a", "c"], remember=True)]

    async def fill(message: str, mode: Any) -> Any:
        return await answers.pop(0)(message, mode)

    editor.fill = fill
    async with acp_session(env, editor, tmp_path, FORMS) as (conn, _, sid):
        answer = await conn.prompt(session_id=sid, prompt=[text_block("numbers")])
        assert answer.stop_reason == "end_turn"
    number = editor.forms[0][1].requested_schema.properties
    assert (number["answer"].type, number["answer"].minimum, number["answer"].maximum) == (
        "integer",
        1,
        10,
    )
    assert editor.forms[0][1].tool_call_id == "c1"
    assert number["remember"].type == "boolean"  # the question may be remembered
    picks = editor.forms[1][1].requested_schema.properties["answer"]
    assert (picks.type, picks.items.enum, picks.min_items) == ("array", ["a", "b", "c"], 1)
    ends = [u.content[0].content.text for u in editor.of_kind("tool_call_update")]
    assert ends == ["got 7", "got ['a', 'c']"]


async def test_secret_is_never_put_in_a_form(tmp_path: Path, daemons: Daemons) -> None:
    env = make_env(
        tmp_path, daemons, [tool_call("asker", "call_1", kind="secret"), {"text": "done"}]
    )
    add_tool(env, "asker", ASKER, run='"unattended"', **KIND_ARG)
    editor = Editor()
    editor.fill = accept("should never be used")
    async with acp_session(env, editor, tmp_path, FORMS) as (conn, _, sid):
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("go")]))

        def noted() -> bool:
            return any(
                u.content and "jp inquiry answer" in u.content[0].content.text
                for u in editor.of_kind("tool_call_update")
            )

        await editor.wait_for(noted, "a note about the secret question")
        note = editor.of_kind("tool_call_update")[-1]
        assert note.tool_call_id == "call_1"
        text = note.content[0].content.text
        assert "secret" in text and f"jp attach {sid}" in text
        # Answered from a terminal, the turn goes on and the prompt ends.
        answered = await asyncio.to_thread(
            run_jp, env, "inquiry", "answer", "call_1.q.1", stdin="hunter2\n"
        )
        assert answered.returncode == 0, answered.stderr
        assert (await asyncio.wait_for(prompt, 30)).stop_reason == "end_turn"
    assert editor.forms == []
    inquiries = [e for e in persisted(env, sid) if e["type"] == "inquiry_response"]
    assert [e["outcome"] for e in inquiries] == ["redacted"]


async def test_without_forms_a_yes_no_question_is_a_permission_request(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = make_env(
        tmp_path, daemons, [tool_call("asker", "call_1", kind="boolean"), {"text": "done"}]
    )
    add_tool(env, "asker", ASKER, run='"unattended"', **KIND_ARG)
    editor = Editor()

    async def yes(asked: ToolCallUpdate, options: list[PermissionOption]) -> str:
        return "yes"

    editor.choose = yes
    async with acp_session(env, editor, tmp_path) as (conn, _, sid):
        answer = await conn.prompt(session_id=sid, prompt=[text_block("go")])
        assert answer.stop_reason == "end_turn"
    asked, options = editor.permissions[0]
    assert [(o.option_id, o.name) for o in options] == [("yes", "Yes"), ("no", "No")]
    # The call keeps its own title; the question is the request's content.
    assert asked.title == 'asker(kind="boolean")'
    assert "Give a boolean" in asked.content[0].content.text
    ends = editor.of_kind("tool_call_update")
    assert ends[-1].content[0].content.text == "got True"
