"""`jp acp` model and mode pickers (session config options), the older `modes`, and
the bridge's slash commands, driven by the SDK's client side against the real daemon."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import RequestError, text_block

from tests.e2e.acp_client import Editor, acp_session, jp_acp, make_env
from tests.e2e.sockets import Daemons, persisted
from tests.e2e.tools import tool_call

ALIASES = '[aliases]\nbig = "anthropic/claude-sonnet-4-5"\nother = "openai/gpt-5"\n'


def picker_env(home: Path, daemons: Daemons) -> dict[str, str]:
    env = make_env(home, daemons, [{"text": "ok"}] * 5)
    config = Path(env["JP_CONFIG"])
    config.write_text(config.read_text() + ALIASES)
    env["ANTHROPIC_API_KEY"] = "sk-test"  # anthropic usable, openai not
    env.pop("OPENAI_API_KEY", None)
    return env


def values(options: list[object]) -> dict[str, tuple[str, list[str]]]:
    """Option id -> (current value, offered values)."""
    return {
        o.id: (o.current_value, [v.value for v in o.options])  # type: ignore[attr-defined]
        for o in options
    }


async def test_pickers_offer_usable_models_and_modes_and_apply_to_the_next_prompt(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = picker_env(tmp_path, daemons)
    editor = Editor()
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, _):
        await conn.initialize(protocol_version=1)
        new = await conn.new_session(cwd=str(tmp_path / "ws"), mcp_servers=[])
        sid = new.session_id
        assert new.config_options is not None
        offered = values(new.config_options)
        # the default, the usable aliases (no openai key here) and the embedded model
        assert offered["model"] == ("test/scripted", ["test/scripted", "big", "local/smollm2"])
        assert offered["mode"] == ("ask", ["ask", "accept-edits", "auto", "read-only"])
        assert "thought_level" not in offered  # the scripted model has no reasoning effort
        assert [o.category for o in new.config_options] == ["model", "mode"]
        assert new.modes is not None and new.modes.current_mode_id == "ask"
        assert [m.id for m in new.modes.available_modes] == list(offered["mode"][1])

        # A model with reasoning effort gets the thought_level option.
        changed = await conn.set_config_option(config_id="model", session_id=sid, value="big")
        assert values(changed.config_options)["thought_level"][0] == "configured"
        changed = await conn.set_config_option(
            config_id="thought_level", session_id=sid, value="high"
        )
        assert values(changed.config_options)["thought_level"][0] == "high"
        changed = await conn.set_config_option(
            config_id="model", session_id=sid, value="test/scripted"
        )
        assert "thought_level" not in values(changed.config_options)

        for config_id, value in (("model", "other"), ("mode", "yolo"), ("colour", "red")):
            with pytest.raises(RequestError) as refused:
                await conn.set_config_option(config_id=config_id, session_id=sid, value=value)
            assert refused.value.code == -32602

        changed = await conn.set_config_option(config_id="mode", session_id=sid, value="read-only")
        assert values(changed.config_options)["mode"][0] == "read-only"
        await editor.wait_for(
            lambda: any(
                u.current_mode_id == "read-only" for u in editor.of_kind("current_mode_update")
            ),
            "current_mode_update",
        )
        answer = await conn.prompt(session_id=sid, prompt=[text_block("hi")])
        assert answer.stop_reason == "end_turn"

        # The older mode picker changes the same setting, and says so as a config update.
        await conn.set_session_mode(mode_id="accept-edits", session_id=sid)
        await editor.wait_for(lambda: bool(editor.of_kind("config_option_update")), "update")
        update = editor.of_kind("config_option_update")[-1]
        assert values(update.config_options)["mode"][0] == "accept-edits"
        await conn.prompt(session_id=sid, prompt=[text_block("again")])

        # A loaded session offers the options too.
        loaded = await conn.load_session(cwd=str(tmp_path / "ws"), session_id=sid, mcp_servers=[])
        assert loaded.config_options is not None and loaded.modes is not None
        # ... with the mode the conversation last ran in.
        assert values(loaded.config_options)["mode"][0] == "accept-edits"
        assert loaded.modes.current_mode_id == "accept-edits"

    starts = [e for e in persisted(env, sid) if e["type"] == "turn_start"]
    assert [s["mode"] for s in starts] == ["read-only", "accept-edits"]


async def test_slash_commands_are_announced_and_run_instead_of_a_turn(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = make_env(tmp_path, daemons, [{"text": "model answer"}] * 5)
    editor = Editor()
    async with acp_session(env, editor, tmp_path) as (conn, _, sid):
        await editor.wait_for(
            lambda: bool(editor.of_kind("available_commands_update")), "commands announced"
        )
        announced = editor.of_kind("available_commands_update")[0].available_commands
        names = [c.name for c in announced]
        assert {"compact", "undo", "mode", "model", "help"} <= set(names)

        async def said(text: str) -> str:
            before = len(editor.text())
            answer = await conn.prompt(session_id=sid, prompt=[text_block(text)])
            assert answer.stop_reason == "end_turn"
            return editor.text()[before:]

        assert "/compact [instructions]" in await said("/help")
        assert "Nothing to compact" in await said("/compact")
        assert "Mode: `auto`" in await said("/mode auto")
        assert "unknown mode" in await said("/mode yolo")
        assert editor.of_kind("config_option_update")  # the picker follows the command
        assert not (Path(env["JP_DATA_DIR"]) / "conversations" / sid).exists()  # no turn ran

        assert await said("/not-a-command please") == "model answer"
        assert await said("hello") == "model answer"
        starts = [e for e in persisted(env, sid) if e["type"] == "turn_start"]
        assert [s["mode"] for s in starts] == ["auto", "auto"]
        # The daemon's own answers reach the editor: two short turns leave nothing older
        # than the recent tail to fold, and the last turn changed no files.
        compacted = await said("/compact keep the names")
        assert "Nothing to compact" in compacted or "Compacted" in compacted
        undone = await said("/undo")
        assert "changed no files" in undone


PLAN = [
    {"step": "read the code", "status": "completed"},
    {"step": "fix it", "status": "in_progress"},
]


async def test_update_plan_is_shown_as_the_plan_and_replayed(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = make_env(
        tmp_path,
        daemons,
        [
            tool_call("update_plan", "p1", plan=PLAN),
            tool_call("update_plan", "p2", plan=[{"step": "x", "status": "finished"}]),
            {"text": "on it"},
        ],
    )
    editor = Editor()
    async with acp_session(env, editor, tmp_path) as (conn, _, sid):
        answer = await conn.prompt(session_id=sid, prompt=[text_block("plan it")])
        assert answer.stop_reason == "end_turn"
        # The invalid second plan failed and changed nothing; the plan is shown as the
        # plan only, never as a tool call too.
        plans = editor.of_kind("plan")
        assert [[(e.content, e.status) for e in p.entries] for p in plans] == [
            [("read the code", "completed"), ("fix it", "in_progress")]
        ]
        assert editor.of_kind("tool_call") == editor.of_kind("tool_call_update") == []

        replayed = Editor()
        async with jp_acp(env, replayed, tmp_path / "acp2.log") as (conn2, _):
            await conn2.initialize(protocol_version=1)
            await conn2.load_session(cwd=str(tmp_path / "ws"), session_id=sid, mcp_servers=[])
            assert [len(p.entries) for p in replayed.of_kind("plan")] == [2]
    calls = [e for e in persisted(env, sid) if e["type"] == "tool_call_request"]
    assert calls[0]["name"] == "update_plan" and calls[0]["arguments"] == {"plan": PLAN}
