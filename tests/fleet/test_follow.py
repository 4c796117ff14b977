"""A client on one fleet member follows, live, a turn that runs on another: every text
delta in order and the turn's end, from a `turn/attach` made mid-turn."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.sockets import Daemons, SocketClient, wait_for
from tests.fleet.test_takeover import member, start

TEXT = " ".join(f"word{i}" for i in range(150))


async def test_a_client_on_b_follows_a_turn_running_on_a(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    stream = {"text": TEXT, "chunk": 8, "delay_ms": 20}  # about 2 s of streaming
    env_a = member(tmp_path / "a", pg_url, [stream])
    env_b = member(tmp_path / "b", pg_url, [])
    _, client_a = await start(daemons, env_a)
    _, client_b = await start(daemons, env_b)
    try:
        started = await client_a.request("turn/start", {"message": "stream"})
        turn = started["turnId"]
        await wait_for(lambda: len(client_a.turn_events(turn)) > 5, "the turn to stream")
        listed = (await client_b.request("turn/list"))["turns"]
        assert [(t["turnId"], t["conversationId"]) for t in listed] == [
            (turn, started["conversationId"])
        ]
        attached = await client_b.request(
            "turn/attach", {"conversationId": started["conversationId"]}
        )
        assert attached["conversationId"] == started["conversationId"]
        completed = await client_b.wait_completed(turn)
        assert completed["event"]["stopReason"] == "end_turn"
        seen = client_b.turn_events(turn)
        text = "".join(e["event"]["text"] for e in seen if e["event"]["kind"] == "text_delta")
        assert text == TEXT  # from the turn's start, though attached mid-turn
        seqs = [e["seq"] for e in seen]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        assert [e["event"]["kind"] for e in seen].count("turn_completed") == 1
    finally:
        await client_a.close()
        await client_b.close()


async def test_seqs_are_the_same_on_every_member(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    """A follower on B gets A's seqs; a `fromSeq` A gave is good on B; the next turn,
    on B, goes on above them, and A's client following it sees B's seqs."""
    stream = {"text": TEXT, "chunk": 8, "delay_ms": 20}
    env_a = member(tmp_path / "a", pg_url, [stream])
    env_b = member(tmp_path / "b", pg_url, [{"text": "Second, on B."}])
    _, client_a = await start(daemons, env_a)
    daemon_b, client_b = await start(daemons, env_b)
    late = None
    try:
        started = await client_a.request("turn/start", {"message": "stream"})
        cid, turn = started["conversationId"], started["turnId"]
        await client_b.request("turn/attach", {"conversationId": cid})
        await wait_for(lambda: len(client_a.turn_events(turn)) > 20, "the turn to stream")
        # A cursor A's client holds, used on B by a client that never attached there.
        cursor = client_a.turn_events(turn)[10]["seq"]
        late = await SocketClient.connect(daemon_b.socket)
        await late.initialize()
        attached = await late.request("turn/attach", {"conversationId": cid, "fromSeq": cursor})
        assert attached["oldestSeq"] <= cursor + 1  # an exact replay
        await client_a.wait_completed(turn)
        await client_b.wait_completed(turn)
        await late.wait_completed(turn)
        on_a = [(e["seq"], e["event"]) for e in client_a.turn_events(turn)]
        assert [(e["seq"], e["event"]) for e in client_b.turn_events(turn)] == on_a
        assert [(e["seq"], e["event"]) for e in late.turn_events(turn)] == [
            (seq, event) for seq, event in on_a if seq > cursor
        ]
        # The next turn runs on B: its seqs go on above A's, the same on A.
        await client_a.request("turn/attach", {"conversationId": cid})
        second = (await client_b.request("turn/start", {"conversationId": cid, "message": "go"}))[
            "turnId"
        ]
        await client_b.wait_completed(second)
        await client_a.wait_completed(second)
        on_b = [(e["seq"], e["event"]) for e in client_b.turn_events(second)]
        assert on_b[0][0] > on_a[-1][0]
        assert [(e["seq"], e["event"]) for e in client_a.turn_events(second)] == on_b
    finally:
        await client_a.close()
        await client_b.close()
        if late is not None:
            await late.close()
