"""Cursors that survive a daemon restart (protocol.md 7.2): a client that re-attaches
with the last `seq` it saw gets exactly what it missed, after a clean stop; after a kill
it is told of the gap (`oldestSeq`) and reads the log instead, never a repeated seq."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.sockets import (
    Daemons,
    SocketClient,
    persisted,
    run_jp_async,
    socket_env,
    wait_for,
)


async def one_turn(daemon_socket: Path, conversation_id: str | None) -> tuple[str, list[dict]]:
    """Run a turn from a new client that stays attached; returns (conversation, events)."""
    client = await SocketClient.connect(daemon_socket)
    await client.initialize()
    params = {"message": "hi"} | ({"conversationId": conversation_id} if conversation_id else {})
    started = await client.request("turn/start", params)
    await client.wait_completed(started["turnId"])
    return started["conversationId"], client.turn_events(started["turnId"])


async def attach(daemon_socket: Path, conversation_id: str, seen: int) -> tuple[SocketClient, dict]:
    """A new client re-attaching with cursor `seen`; returns (client, attach result)."""
    client = await SocketClient.connect(daemon_socket)
    await client.initialize()
    params = {"conversationId": conversation_id, "fromSeq": seen}
    return client, await client.request("turn/attach", params)


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

    back, result = await attach(daemon.socket, conversation_id, seen)
    assert back.events == after  # exactly what it missed, once, in order
    shown = await run_jp_async(env, "attach", conversation_id, "--from-seq", str(seen))
    assert shown.returncode == 0 and "not every event" not in shown.stderr, shown.stderr
    assert result["lastSeq"] == after[-1]["seq"] and result["oldestSeq"] == 1
    everyone, _ = await attach(daemon.socket, conversation_id, 0)
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
    back, result = await attach(daemon.socket, conversation_id, seen)
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


async def test_a_kill_mid_turn_of_a_new_conversation_never_repeats_a_seq(
    tmp_path: Path, daemons: Daemons
) -> None:
    """A new conversation writes no seq mark for its first block (protocol.md 7.2): a
    daemon killed while streaming its first turn leaves none, and the next run must
    still start above every seq the dead one sent."""
    slow = {"text": "abcdefghijklmnopqrstuvwxyz" * 4, "chunk": 1, "delay_ms": 20}
    env = socket_env(tmp_path, [slow, {"text": "again", "chunk": 2}] * 2)
    daemon = await daemons.start(env)
    client = await SocketClient.connect(daemon.socket)
    await client.initialize()
    started = await client.request("turn/start", {"message": "hi"})
    conversation_id, turn_id = started["conversationId"], started["turnId"]
    await wait_for(lambda: len(client.turn_events(turn_id)) >= 5, "a few deltas")
    daemon.process.kill()  # SIGKILL mid-stream: no exact mark, no replay file
    await daemon.wait_exit()
    assert not (Path(env["JP_DATA_DIR"]) / "replay" / f"{conversation_id}.seq").exists()
    sent = [e["seq"] for e in client.turn_events(turn_id)]
    assert "turn_completed" not in [e["event"]["kind"] for e in client.turn_events(turn_id)]
    seen = max(sent)

    daemon = await daemons.start(env)
    back, result = await attach(daemon.socket, conversation_id, seen)
    assert back.events == []
    assert result["oldestSeq"] > seen + 1 and result["oldestSeq"] == result["lastSeq"] + 1
    again = await back.request("turn/start", {"message": "on", "conversationId": conversation_id})
    await back.wait_completed(again["turnId"])
    after = [e["seq"] for e in back.events]
    assert after[0] == result["oldestSeq"] and not set(after) & set(sent)
    assert after == sorted(after) and min(after) > max(sent)

    # Killed again mid-turn, now in a conversation that has a mark: still above.
    third = await back.request("turn/start", {"message": "more", "conversationId": conversation_id})
    await wait_for(lambda: len(back.turn_events(third["turnId"])) >= 3, "a few more deltas")
    daemon.process.kill()
    await daemon.wait_exit()
    last_sent = max(e["seq"] for e in back.events)
    daemon = await daemons.start(env)
    _, result = await attach(daemon.socket, conversation_id, last_sent)
    assert result["oldestSeq"] > last_sent + 1
    assert await daemon.stop() == 0
