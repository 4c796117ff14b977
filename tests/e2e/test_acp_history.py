"""`jp acp` history polish, driven by the SDK's client side: the title as
`session_info_update`, `session/delete` (routed by the bridge; SDK 0.12.1 does not),
and `additionalDirectories` passed to the daemon as extra workspace roots."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import RequestError, text_block

from tests.e2e.acp_client import Editor, acp_session, jp_acp, make_env
from tests.e2e.sockets import Daemons


async def test_title_update_and_delete(tmp_path: Path, daemons: Daemons) -> None:
    env = make_env(tmp_path, daemons, [{"text": "ok"}] * 3)
    editor = Editor()
    async with acp_session(env, editor, tmp_path) as (conn, _, sid):
        init_caps = [
            m for m in editor.incoming if "result" in m and "agentCapabilities" in m["result"]
        ]
        session_caps = init_caps[0]["result"]["agentCapabilities"]["sessionCapabilities"]
        assert "delete" in session_caps and "additionalDirectories" in session_caps
        await conn.prompt(session_id=sid, prompt=[text_block("Fix the parser")])
        await editor.wait_for(lambda: bool(editor.of_kind("session_info_update")), "title")
        assert editor.of_kind("session_info_update")[-1].title == "Fix the parser"

        # A loaded session gets its title too.
        again = Editor()
        async with jp_acp(env, again, tmp_path / "acp2.log") as (conn2, _):
            await conn2.initialize(protocol_version=1)
            await conn2.load_session(cwd=str(tmp_path / "ws"), session_id=sid, mcp_servers=[])
            await again.wait_for(lambda: bool(again.of_kind("session_info_update")), "title")

        deleted = await conn._conn.send_request("session/delete", {"sessionId": sid})
        assert deleted == {}
        assert (await conn.list_sessions(cwd=str(tmp_path / "ws"))).sessions == []
        assert not (Path(env["JP_DATA_DIR"]) / "conversations" / sid).exists()
        # The deleted session is gone from the bridge too; deleting again is an error.
        with pytest.raises(RequestError):
            await conn.prompt(session_id=sid, prompt=[text_block("still there?")])
        with pytest.raises(RequestError) as missing:
            await conn._conn.send_request("session/delete", {"sessionId": sid})
        assert missing.value.code != -32601
        with pytest.raises(RequestError) as bad:
            await conn._conn.send_request("session/delete", {})
        assert bad.value.code in (-32602, -32603)


async def test_additional_directories_go_with_each_turn(tmp_path: Path, daemons: Daemons) -> None:
    env = make_env(tmp_path, daemons, [{"text": "done"}])
    extra = tmp_path / "shared"
    extra.mkdir()
    editor = Editor()
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, _):
        await conn.initialize(protocol_version=1)
        with pytest.raises(RequestError) as relative:
            await conn.new_session(
                cwd=str(tmp_path / "ws"), mcp_servers=[], additional_directories=["rel/dir"]
            )
        assert relative.value.code == -32602
        session = await conn.new_session(
            cwd=str(tmp_path / "ws"), mcp_servers=[], additional_directories=[str(extra)]
        )
        # The daemon takes the turn with `environment.additionalRoots` (it would refuse
        # a malformed one with -32602; what it makes of them is tested in the unit tests).
        answer = await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
        assert answer.stop_reason == "end_turn"


def test_the_turn_environment_names_the_additional_roots() -> None:
    from jpcli.acp.agent import JpAgent
    from jpcli.acp.session import Session

    agent = JpAgent(environ={"HOME": "/home/x"})
    session = Session(
        session_id="c-1",
        cwd="/ws",
        editor=None,  # type: ignore[arg-type]
        forms=False,
        answer_types=frozenset(),
        exists=False,
        extra_roots=["/lib"],
    )
    environment = agent._environment(session)
    assert environment == {
        "cwd": "/ws",
        "env": {"HOME": "/home/x"},
        "additionalRoots": ["/lib"],
        "umask": environment["umask"],  # the bridge's, as `jp` sends its shell's
    }


async def test_an_image_prompt_is_refused_clearly_by_a_model_without_images(
    tmp_path: Path, daemons: Daemons
) -> None:
    from acp.schema import ImageContentBlock

    env = make_env(tmp_path, daemons, [{"text": "fine"}])
    editor = Editor()
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, _):
        init = await conn.initialize(protocol_version=1)
        assert init.agent_capabilities is not None
        assert init.agent_capabilities.prompt_capabilities is not None
        assert init.agent_capabilities.prompt_capabilities.image
        sid = (await conn.new_session(cwd=str(tmp_path / "ws"), mcp_servers=[])).session_id
        image = ImageContentBlock(type="image", mime_type="image/png", data="iVBORw0KGgo=")
        with pytest.raises(RequestError) as refused:
            await conn.prompt(session_id=sid, prompt=[text_block("look"), image])
        assert refused.value.code == -32602
        assert "takes no images" in str(refused.value.args[0])
        # Nothing was recorded; the session goes on with text.
        answer = await conn.prompt(session_id=sid, prompt=[text_block("text then")])
        assert answer.stop_reason == "end_turn"


def test_image_blocks_become_turn_images() -> None:
    from acp.schema import ImageContentBlock
    from jpcli.acp.inputs import prompt_images, prompt_text

    image = ImageContentBlock(type="image", mime_type="image/webp", data="UklGRg==")
    assert prompt_images([text_block("a"), image]) == [
        {"mimeType": "image/webp", "data": "UklGRg=="}
    ]
    assert prompt_text([text_block("a"), image]) == "a"
    assert prompt_text([image]) == "(image)"
