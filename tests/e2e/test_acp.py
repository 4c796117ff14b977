"""`jp acp` driven by the `agent-client-protocol` package's client side, against the
shared daemon (started by the bridge) on the scripted provider: sessions, streaming,
load/resume/list, cancel, bad input, disconnect and daemon restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from acp import RequestError, text_block
from acp.schema import (
    EmbeddedResourceContentBlock,
    PermissionOption,
    TextResourceContents,
    ToolCallUpdate,
)

from tests.e2e.acp_client import (
    DEPLOY,
    ENV_ARG,
    SLOW,
    Editor,
    acp_session,
    jp_acp,
    make_env,
)
from tests.e2e.sockets import Daemons, persisted, run_jp_async, wait_for
from tests.e2e.tools import add_tool, tool_call


async def test_prompt_streams_and_sessions_are_conversations(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = make_env(
        tmp_path,
        daemons,
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
        # `usage` is unstable: only for an editor that declares `_meta.usage`.
        assert answer.usage is None
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


async def test_cancel_keeps_what_was_streamed(tmp_path: Path, daemons: Daemons) -> None:
    env = make_env(tmp_path, daemons, [SLOW])
    editor = Editor()
    async with acp_session(env, editor, tmp_path) as (conn, _, sid):
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
    env = make_env(
        tmp_path,
        daemons,
        [
            {"reasoning": "hm", "text": "first answer"},
            tool_call("deploy", "c1"),
            {"text": "second"},
        ],
    )
    add_tool(env, "deploy", DEPLOY, run='"unattended"', **ENV_ARG)
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
    env = make_env(
        tmp_path, daemons, [SLOW, tool_call("deploy", "call_1"), {"text": "after"}, {"text": "yes"}]
    )
    add_tool(env, "deploy", DEPLOY, run='"ask"', detached='"deny"', **ENV_ARG)
    editor = Editor()

    async def bogus(asked: ToolCallUpdate, options: list[PermissionOption]) -> str:
        return "not-offered"

    editor.choose = bogus
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, process):
        await conn.initialize(protocol_version=1)
        with pytest.raises(RequestError) as unknown:
            await conn.prompt(session_id="c-nope", prompt=[text_block("hi")])
        assert unknown.value.code == -32002 and "unknown session" in str(unknown.value)
        with pytest.raises(RequestError) as bad_load:
            await conn.load_session(cwd=str(tmp_path / "ws"), session_id="c-nope", mcp_servers=[])
        assert bad_load.value.code == -32002

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
    env = make_env(tmp_path, daemons, [{"text": "answer"}])  # each daemon replays the script anew
    editor = Editor()
    async with acp_session(env, editor, tmp_path) as (conn, _, sid):
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
    env = make_env(tmp_path, daemons, [SLOW])
    editor = Editor()
    async with acp_session(env, editor, tmp_path) as (conn, process, sid):
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
