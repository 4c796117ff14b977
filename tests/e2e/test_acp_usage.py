"""`jp acp` tells the editor how full the context is (`usage_update` after each model
call, with the cost where the model has a price) and shows compactions (issue 29 item 4,
protocol.md 12.5), driven with the ACP SDK's client side."""

from __future__ import annotations

from pathlib import Path

from acp import text_block

from tests.e2e.acp_client import Editor, jp_acp, make_env
from tests.e2e.sockets import Daemons, run_jp_async

LONG = "a long answer. " * 200


async def test_usage_update_after_each_model_call(tmp_path: Path, daemons: Daemons) -> None:
    usage = {"input_tokens": 1200, "output_tokens": 300}
    env = make_env(
        tmp_path,
        daemons,
        [{"text": "one", "usage": usage}, {"text": "two", "usage": usage}],
    )
    config = Path(env["JP_CONFIG"])
    text = config.read_text().replace(
        'id = "test/scripted"\n', 'id = "test/scripted"\ncontext_window = 10000\n'
    )
    config.write_text(text + '[prices."test/scripted"]\ninput = 3.0\noutput = 15.0\n')
    editor = Editor()
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, _):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(tmp_path / "ws"), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("hi")])
        await conn.prompt(session_id=sid, prompt=[text_block("again")])
    updates = editor.of_kind("usage_update")
    assert len(updates) == 2
    assert [(u.used, u.size) for u in updates] == [(1500, 10_000), (1500, 10_000)]
    # Each call costs 1200 x 3 + 300 x 15 per million: the session's total grows.
    assert updates[0].cost.amount == 0.0081 and updates[0].cost.currency == "USD"
    assert abs(updates[1].cost.amount - 0.0162) < 1e-9


async def test_no_usage_update_without_a_known_window(tmp_path: Path, daemons: Daemons) -> None:
    env = make_env(tmp_path, daemons, [{"text": "one", "usage": {"input_tokens": 5}}])
    editor = Editor()
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, _):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(tmp_path / "ws"), mcp_servers=[])).session_id
        answer = await conn.prompt(session_id=sid, prompt=[text_block("hi")])
        assert answer.stop_reason == "end_turn"
    assert editor.of_kind("usage_update") == []


async def test_a_compaction_is_shown_in_the_editor(tmp_path: Path, daemons: Daemons) -> None:
    env = make_env(
        tmp_path,
        daemons,
        [{"text": LONG}, {"text": LONG}, {"text": LONG}, {"text": "Goal: shown."}],
    )
    editor = Editor()
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, _):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(tmp_path / "ws"), mcp_servers=[])).session_id
        for message in ("one", "two", "three"):
            await conn.prompt(session_id=sid, prompt=[text_block(message)])
    done = await run_jp_async(env, "conversation", "compact", sid)
    assert done.returncode == 0, done.stderr
    # Loading the session replays the compaction as a note in the conversation.
    replay = Editor()
    async with jp_acp(env, replay, tmp_path / "acp2.log") as (conn, _):
        await conn.initialize(protocol_version=1)
        await conn.load_session(cwd=str(tmp_path / "ws"), session_id=sid, mcp_servers=[])
        await replay.wait_for(lambda: "context compacted" in replay.text(), "the note")
    assert "[context compacted: older part summarised" in replay.text()
