"""Cursors that survive a daemon restart (protocol.md 7.2): a client that re-attaches
with the last `seq` it saw gets exactly what it missed, after a clean stop; after a kill
it is told of the gap (`oldestSeq`) and reads the log instead, never a repeated seq."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.sockets import Daemons, SocketClient, persisted, run_jp_async, socket_env


async def one_turn(daemon_socket: Path, conversation_id: str | None) -> tuple[str, list[dict]]:
    """Run a turn from a new client that stays attached; returns (conversation, events)."""
    client = await SocketClient.connect(daemon_socket)
    await client.initialize()
    params = {"message": "hi"} | ({"conversationId": conversation_id} if conversation_id else {})
    started = await client.request("turn/start", params)
    await client.wait_completed(started["turnId"])
    return started["conversationId"], client.turn_events(started["turnId"])


async def test_reattach_after_a_clean_restart_is_exact(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path, [{"text": "abcdef", "chunk": 2}] * 3)
    daemon = await daemons.start(env)
    conversation_id, before = await one_turn(daemon.socket, None)
    seen = before[-1]["seq"]
    assert await daemon.stop() == 0  # SIGTERM with the client still attached

    daemon = await daemons.start(env)
    _, after = await one_turn(daemon.socket, conversation_id)
    # The new run goes on from the old one's last seq: no seq is used twice.
    assert [e["seq"] for e in after] == list(range(seen + 1, seen + 1 + len(after)))

    back = await SocketClient.connect(daemon.socket)
    await back.initialize()
    result = await back.request("turn/attach", {"conversationId": conversation_id, "fromSeq": seen})
    assert back.events == after  # exactly what it missed, once, in order
    shown = await run_jp_async(env, "attach", conversation_id, "--from-seq", str(seen))
    assert shown.returncode == 0 and "not every event" not in shown.stderr, shown.stderr
    assert result["lastSeq"] == after[-1]["seq"] and result["oldestSeq"] == 1
    everyone = await SocketClient.connect(daemon.socket)
    await everyone.initialize()
    await everyone.request("turn/attach", {"conversationId": conversation_id, "fromSeq": 0})
    assert everyone.events == before + after  # the earlier run's events are replayed too
    assert await daemon.stop() == 0


async def test_after_a_kill_the_gap_is_visible_and_seqs_never_repeat(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path, [{"text": "abcdef", "chunk": 2}] * 3)
    daemon = await daemons.start(env)
    conversation_id, before = await one_turn(daemon.socket, None)
    seen = before[-1]["seq"]
    daemon.process.kill()  # SIGKILL: the replay kept in memory is lost
    await daemon.wait_exit()

    daemon = await daemons.start(env)
    back = await SocketClient.connect(daemon.socket)
    await back.initialize()
    result = await back.request("turn/attach", {"conversationId": conversation_id, "fromSeq": seen})
    # Nothing is replayed and the client can tell: the kept events start above its cursor
    # with a hole, so it reads the persisted log (`conversation/get`) as section 5.8 says.
    assert back.events == []
    assert result["oldestSeq"] > seen + 1 and result["oldestSeq"] == result["lastSeq"] + 1
    assert any(e["type"] == "turn_end" for e in persisted(env, conversation_id))
    shown = await run_jp_async(env, "attach", conversation_id, "--from-seq", str(seen))
    assert shown.returncode == 0, shown.stderr
    assert f"not every event after {seen} is kept for replay" in shown.stderr
    assert f"jp conversation show {conversation_id}" in shown.stderr
    started = await back.request(
        "turn/start", {"message": "again", "conversationId": conversation_id}
    )
    await back.wait_completed(started["turnId"])
    assert back.events[0]["seq"] == result["oldestSeq"]  # above every seq sent before
    assert await daemon.stop() == 0
