"""`jp acp` driven by the `agent-client-protocol` package's client side, against the
shared daemon (started by the bridge) on the scripted provider."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from acp import RequestError, text_block
from acp.schema import (
    EmbeddedResourceContentBlock,
    EnvVariable,
    McpServerStdio,
    PermissionOption,
    TextResourceContents,
    ToolCallUpdate,
)

from tests.e2e.acp_client import FORMS, Editor, accept, jp_acp
from tests.e2e.sockets import Daemons, run_jp, run_jp_async, socket_env, wait_for
from tests.e2e.tools import make_tool, tool_toml

SLOW = {"text": "tick " * 40, "chunk": 5, "delay_ms": 100}
MCP_SERVER = Path(__file__).parent.parent / "fixtures" / "mcp_server.py"

ASKER = """\
kind = args.get("kind", "boolean")
answer_type = {"type": kind}
if kind == "multi_select":
    answer_type.update(options=["a", "b", "c"], min_items=1)
if kind == "number":
    answer_type.update(minimum=1, maximum=10, integer=True)
if "q" in answers:
    print(json.dumps({"type": "success", "content": f"got {answers['q']!r}"}))
else:
    question = {"id": "q", "text": f"Give a {kind}", "answer_type": answer_type}
    print(json.dumps({"type": "needs_input", "question": question}))
"""
DEPLOY = """\
print(json.dumps({"type": "success", "content": "deployed " + args.get("env", "?")}))
"""
ENV_ARG = {"parameters.env": '{ type = "string" }'}
KIND_ARG = {"parameters.kind": '{ type = "string" }'}


@pytest_asyncio.fixture
async def daemons() -> AsyncIterator[Daemons]:
    running = Daemons()
    yield running
    await running.stop_all()


def make_env(home: Path, responses: list[dict[str, Any]], tools: str = "") -> dict[str, str]:
    env = socket_env(home, responses)
    (home / "ws").mkdir(exist_ok=True)
    config = Path(env["JP_CONFIG"])
    config.write_text(config.read_text() + tools)
    return env


def persisted(env: dict[str, str], conversation_id: str) -> list[dict[str, Any]]:
    path = Path(env["JP_DATA_DIR"]) / "conversations" / conversation_id / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


async def test_prompt_streams_and_sessions_are_conversations(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = make_env(
        tmp_path,
        [
            {
                "reasoning": "thinking",
                "text": "Hello there, friend.",
                "chunk": 4,
                "delay_ms": 30,  # apart enough not to be merged on the daemon's 5 ms tick
                "usage": {"input_tokens": 11, "output_tokens": 5},
            }
        ],
    )
    daemons.watch(env)  # the bridge starts the shared daemon itself
    editor = Editor()
    ws = str(tmp_path / "ws")
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, _):
        init = await conn.initialize(protocol_version=1)
        assert init.protocol_version == 1
        caps = init.agent_capabilities
        assert caps is not None and caps.load_session
        assert caps.prompt_capabilities is not None and caps.prompt_capabilities.embedded_context
        assert caps.session_capabilities is not None
        assert caps.session_capabilities.list is not None
        assert caps.session_capabilities.resume is not None
        assert init.agent_info is not None and init.agent_info.name == "jp"

        session = await conn.new_session(cwd=ws, mcp_servers=[])
        sid = session.session_id
        resource = EmbeddedResourceContentBlock(
            type="resource",
            resource=TextResourceContents(uri="file:///ws/notes.txt", text="a note"),
        )
        answer = await conn.prompt(session_id=sid, prompt=[text_block("Say hello"), resource])
        assert answer.stop_reason == "end_turn"
        assert answer.usage is not None and answer.usage.output_tokens == 5
        assert editor.text() == "Hello there, friend."
        assert editor.text("agent_thought_chunk") == "thinking"
        assert len(editor.of_kind("agent_message_chunk")) > 2  # streamed in pieces

        listed = await conn.list_sessions(cwd=ws)
        assert [(s.session_id, s.cwd, s.title) for s in listed.sessions] == [(sid, ws, "Say hello")]
        assert (await conn.list_sessions(cwd=str(tmp_path))).sessions == []

    # The session is the daemon's conversation, in the session's workspace.
    events = persisted(env, sid)
    assert events[0]["type"] == "turn_start" and events[0]["workspace"] == ws
    assert events[1]["content"].startswith("Say hello\n\nContext from file:///ws/notes.txt:")
    assert "a note" in events[1]["content"]


async def test_the_editors_mcp_servers_serve_the_sessions_turns(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = make_env(tmp_path, [call("c1", "echo", text="hi"), {"text": "done"}])
    daemons.watch(env)
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
    tools = tool_toml("deploy", make_tool(tmp_path, "deploy", DEPLOY), run='"ask"', **ENV_ARG)
    env = make_env(
        tmp_path,
        [call("call_1", "deploy", env="prod"), call("call_2", "deploy", env="dev"), {"text": "ok"}],
        tools,
    )
    daemons.watch(env)
    editor = Editor()

    async def always(tool_call: ToolCallUpdate, options: list[PermissionOption]) -> str:
        return "allow_always"

    editor.choose = always
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, _):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(tmp_path / "ws"), mcp_servers=[])).session_id
        answer = await conn.prompt(session_id=sid, prompt=[text_block("deploy twice")])
        assert answer.stop_reason == "end_turn"

    # Asked once: "always" is remembered for the rest of the turn.
    assert len(editor.permissions) == 1
    asked, options = editor.permissions[0]
    assert asked.tool_call_id == "call_1" and asked.raw_input == {"env": "prod"}
    assert [o.kind for o in options] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]
    starts = editor.of_kind("tool_call")
    assert [(s.tool_call_id, s.title, s.status) for s in starts] == [
        ("call_1", 'deploy(env="prod")', "in_progress"),
        ("call_2", 'deploy(env="dev")', "in_progress"),
    ]
    ends = editor.of_kind("tool_call_update")
    assert [(e.tool_call_id, e.status, e.content[0].content.text) for e in ends] == [
        ("call_1", "completed", "deployed prod"),
        ("call_2", "completed", "deployed dev"),
    ]


async def test_permission_answered_at_a_terminal_closes_the_editors(
    tmp_path: Path, daemons: Daemons
) -> None:
    tools = tool_toml("deploy", make_tool(tmp_path, "deploy", DEPLOY), run='"ask"', **ENV_ARG)
    env = make_env(tmp_path, [call("call_1", "deploy", env="prod"), {"text": "ok"}], tools)
    daemons.watch(env)
    editor = Editor()
    never = asyncio.Event()

    async def wait_forever(tool_call: ToolCallUpdate, options: list[PermissionOption]) -> str:
        await never.wait()
        return "reject_once"

    editor.choose = wait_forever
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, _):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(tmp_path / "ws"), mcp_servers=[])).session_id
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("go")]))
        await editor.wait_for(lambda: bool(editor.permissions), "the permission request")
        answered = await run_jp_async(env, "inquiry", "answer", "call_1.permission.run", "true")
        assert answered.returncode == 0, answered.stderr
        assert (await asyncio.wait_for(prompt, 30)).stop_reason == "end_turn"
        never.set()
    texts = [u.content[0].content.text for u in editor.of_kind("tool_call_update") if u.content]
    assert texts == ["Answered elsewhere.", "deployed prod"]


async def test_ask_user_through_a_form(tmp_path: Path, daemons: Daemons) -> None:
    ask = call(
        "call_1",
        "ask_user",
        question="Which branch?",
        answer_type="select",
        options=["main", "dev"],
    )
    again = call("call_2", "ask_user", question="Really?", answer_type="boolean")
    env = make_env(tmp_path, [ask, again, {"text": "done"}])
    daemons.watch(env)
    editor = Editor()
    answers: list[Any] = [accept("dev"), None]  # then: decline

    async def fill(message: str, mode: Any) -> Any:
        filler = answers.pop(0)
        if filler is None:
            from acp.schema import DeclineElicitationResponse

            return DeclineElicitationResponse(action="decline")
        return await filler(message, mode)

    editor.fill = fill
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, _):
        await conn.initialize(protocol_version=1, client_capabilities=FORMS)
        sid = (await conn.new_session(cwd=str(tmp_path / "ws"), mcp_servers=[])).session_id
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
    tools = tool_toml("asker", make_tool(tmp_path, "asker", ASKER), run='"unattended"', **KIND_ARG)
    calls = [call("c1", "asker", kind="number"), call("c2", "asker", kind="multi_select")]
    env = make_env(tmp_path, [*calls, {"text": "done"}], tools)
    daemons.watch(env)
    editor = Editor()
    answers = [accept(7), accept(["a", "c"], remember=True)]

    async def fill(message: str, mode: Any) -> Any:
        return await answers.pop(0)(message, mode)

    editor.fill = fill
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, _):
        await conn.initialize(protocol_version=1, client_capabilities=FORMS)
        sid = (await conn.new_session(cwd=str(tmp_path / "ws"), mcp_servers=[])).session_id
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
    tools = tool_toml("asker", make_tool(tmp_path, "asker", ASKER), run='"unattended"', **KIND_ARG)
    env = make_env(tmp_path, [call("call_1", "asker", kind="secret"), {"text": "done"}], tools)
    daemons.watch(env)
    editor = Editor()
    editor.fill = accept("should never be used")
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, _):
        await conn.initialize(protocol_version=1, client_capabilities=FORMS)
        sid = (await conn.new_session(cwd=str(tmp_path / "ws"), mcp_servers=[])).session_id
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
    tools = tool_toml("asker", make_tool(tmp_path, "asker", ASKER), run='"unattended"', **KIND_ARG)
    env = make_env(tmp_path, [call("call_1", "asker", kind="boolean"), {"text": "done"}], tools)
    daemons.watch(env)
    editor = Editor()

    async def yes(tool_call: ToolCallUpdate, options: list[PermissionOption]) -> str:
        return "yes"

    editor.choose = yes
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, _):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(tmp_path / "ws"), mcp_servers=[])).session_id
        answer = await conn.prompt(session_id=sid, prompt=[text_block("go")])
        assert answer.stop_reason == "end_turn"
    asked, options = editor.permissions[0]
    assert [(o.option_id, o.name) for o in options] == [("yes", "Yes"), ("no", "No")]
    assert "Give a boolean" in (asked.title or "")
    ends = editor.of_kind("tool_call_update")
    assert ends[-1].content[0].content.text == "got True"


async def test_cancel_keeps_what_was_streamed(tmp_path: Path, daemons: Daemons) -> None:
    env = make_env(tmp_path, [SLOW])
    daemons.watch(env)
    editor = Editor()
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, _):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(tmp_path / "ws"), mcp_servers=[])).session_id
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("story")]))
        await editor.wait_for(lambda: len(editor.text()) >= 10, "some streamed text")
        await conn.cancel(session_id=sid)
        assert (await asyncio.wait_for(prompt, 30)).stop_reason == "cancelled"
    streamed = editor.text()
    assert 10 <= len(streamed) < len(SLOW["text"])
    events = persisted(env, sid)
    assert events[-1]["stop_reason"] == "cancelled"
    assert next(e["message"] for e in events if e["type"] == "chat_response") == streamed


async def test_load_replays_and_resume_does_not(tmp_path: Path, daemons: Daemons) -> None:
    tools = tool_toml(
        "deploy", make_tool(tmp_path, "deploy", DEPLOY), run='"unattended"', **ENV_ARG
    )
    env = make_env(
        tmp_path,
        [{"reasoning": "hm", "text": "first answer"}, call("c1", "deploy"), {"text": "second"}],
        tools,
    )
    daemons.watch(env)
    ws = str(tmp_path / "ws")
    first = Editor()
    async with jp_acp(env, first, tmp_path / "acp.log") as (conn, _):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=ws, mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("one")])
        await conn.prompt(session_id=sid, prompt=[text_block("two")])

    # Another editor process: the session is found by its workspace, then loaded.
    second = Editor()
    async with jp_acp(env, second, tmp_path / "acp.log") as (conn, _):
        await conn.initialize(protocol_version=1)
        assert [s.session_id for s in (await conn.list_sessions(cwd=ws)).sessions] == [sid]
        await conn.load_session(cwd=ws, session_id=sid, mcp_servers=[])
        replayed = [(u.session_update, getattr(u, "tool_call_id", None)) for _, u in second.updates]
        assert replayed == [
            ("user_message_chunk", None),
            ("agent_thought_chunk", None),
            ("agent_message_chunk", None),
            ("user_message_chunk", None),
            ("tool_call", "c1"),
            ("tool_call_update", "c1"),
            ("agent_message_chunk", None),
        ]
        assert second.text("user_message_chunk") == "onetwo"
        assert second.text() == "first answersecond"

        third = Editor()
    async with jp_acp(env, third, tmp_path / "acp.log") as (conn, _):
        await conn.initialize(protocol_version=1)
        await conn.resume_session(cwd=ws, session_id=sid, mcp_servers=[])
        assert third.updates == []


async def test_bad_input_gets_errors_and_everything_keeps_running(
    tmp_path: Path, daemons: Daemons
) -> None:
    tools = tool_toml(
        "deploy", make_tool(tmp_path, "deploy", DEPLOY), run='"ask"', detached='"deny"', **ENV_ARG
    )
    env = make_env(
        tmp_path, [SLOW, call("call_1", "deploy"), {"text": "after"}, {"text": "yes"}], tools
    )
    daemons.watch(env)
    editor = Editor()

    async def bogus(tool_call: ToolCallUpdate, options: list[PermissionOption]) -> str:
        return "not-offered"

    editor.choose = bogus
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, process):
        await conn.initialize(protocol_version=1)
        with pytest.raises(RequestError) as unknown:
            await conn.prompt(session_id="c-nope", prompt=[text_block("hi")])
        assert unknown.value.code == -32602 and "unknown session" in str(unknown.value)
        with pytest.raises(RequestError) as bad_load:
            await conn.load_session(cwd=str(tmp_path / "ws"), session_id="c-nope", mcp_servers=[])
        assert bad_load.value.code == -32001

        assert process.stdin is not None
        before = len(editor.incoming)
        process.stdin.write(b"this is not json\n[1, 2]\n")
        await editor.wait_for(lambda: len(editor.incoming) >= before + 2, "two error responses")
        errors = editor.incoming[before:]
        assert [m["error"]["code"] for m in errors] == [-32700, -32600]
        assert all(m["id"] is None for m in errors)

        sid = (await conn.new_session(cwd=str(tmp_path / "ws"), mcp_servers=[])).session_id
        running = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("long")]))
        await editor.wait_for(lambda: bool(editor.text()), "streaming")
        with pytest.raises(RequestError) as busy:
            await conn.prompt(session_id=sid, prompt=[text_block("again")])
        assert busy.value.code == -32005
        await conn.cancel(session_id=sid)
        assert (await running).stop_reason == "cancelled"

        # An option the editor was not offered is refused; the tool's detached policy
        # (deny) then decides, and the session goes on.
        answer = await conn.prompt(session_id=sid, prompt=[text_block("deploy")])
        assert answer.stop_reason == "end_turn"
        denied = editor.of_kind("tool_call_update")[-1]
        assert denied.status == "failed"
        answer = await conn.prompt(session_id=sid, prompt=[text_block("still there?")])
        assert answer.stop_reason == "end_turn"
    assert "'not-offered', which was not offered" in (tmp_path / "acp.log").read_text()


async def test_a_session_outlives_a_daemon_restart(tmp_path: Path, daemons: Daemons) -> None:
    env = make_env(tmp_path, [{"text": "answer"}])  # each daemon replays the script anew
    daemons.watch(env)
    editor = Editor()
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, _):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(tmp_path / "ws"), mcp_servers=[])).session_id
        assert (await conn.prompt(session_id=sid, prompt=[text_block("one")])).stop_reason == (
            "end_turn"
        )
        await run_jp_async(env, "daemon", "stop")
        await wait_for(lambda: not Path(env["JP_SOCKET"]).exists(), "the daemon to stop")
        # The next prompt starts a daemon again and continues the same conversation.
        assert (await conn.prompt(session_id=sid, prompt=[text_block("two")])).stop_reason == (
            "end_turn"
        )
    assert editor.text() == "answeranswer"
    assert [e["content"] for e in persisted(env, sid) if e["type"] == "chat_request"] == [
        "one",
        "two",
    ]


async def test_turn_goes_on_after_the_editor_disconnects(tmp_path: Path, daemons: Daemons) -> None:
    env = make_env(tmp_path, [SLOW])
    daemons.watch(env)
    editor = Editor()
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, process):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(tmp_path / "ws"), mcp_servers=[])).session_id
        asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("story")]))  # noqa: RUF006
        await editor.wait_for(lambda: bool(editor.text()), "streaming")
    # The editor closed the bridge's stdin: the bridge exited, the turn did not stop.
    assert await asyncio.wait_for(process.wait(), 30) == 0
    listed = await run_jp_async(env, "turn", "ls")
    assert listed.returncode == 0 and sid in listed.stdout
    attached = await run_jp_async(env, "attach", sid)
    assert (attached.returncode, attached.stdout) == (0, SLOW["text"].rstrip() + " \n")
    await wait_for(lambda: persisted(env, sid)[-1]["type"] == "turn_end", "turn_end")
    assert persisted(env, sid)[-1]["stop_reason"] == "end_turn"
