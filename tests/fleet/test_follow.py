"""A client on one fleet member follows, live, a turn that runs on another: every text
delta in order and the turn's end, from a `turn/attach` made mid-turn."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.sockets import Daemons, wait_for
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
