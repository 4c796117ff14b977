"""A client following a turn across a takeover sees the output as the log keeps it:
the cut call's deltas (as the dead member sent them) are discarded by a `retry`, the
kept part follows once, then the survivor's continuation; seqs only grow."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from tests.e2e.sockets import Daemons, wait_for
from tests.fleet.test_takeover import member, start, stored

TEXT = " ".join(f"word{i}" for i in range(400))


def shown(events: list[dict[str, Any]]) -> str:
    """The text a client shows: deltas, less those a `retry` discards (protocol 7.1)."""
    text = ""
    for e in events:
        if e["event"]["kind"] == "retry":
            text = ""  # the turn's only model call so far was the cut one
        elif e["event"]["kind"] == "text_delta":
            text += e["event"]["text"]
    return text


async def test_a_follower_sees_a_cut_output_once_across_a_takeover(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    stream = {"text": TEXT, "chunk": 8, "delay_ms": 20}  # about 6 s of streaming
    env_a = member(tmp_path / "a", pg_url, [stream])
    env_b = member(tmp_path / "b", pg_url, [{"text": " The rest."}])
    daemon_a, client_a = await start(daemons, env_a)
    _, client_b = await start(daemons, env_b)
    try:
        started = await client_a.request("turn/start", {"message": "stream"})
        cid, turn = started["conversationId"], started["turnId"]
        await client_b.request("turn/attach", {"conversationId": cid})

        def checkpointed() -> bool:
            return any(e.get("type") == "chat_checkpoint" for _, e in stored(pg_url, cid))

        await wait_for(checkpointed, "a checkpoint of the streamed text")
        await wait_for(lambda: len(client_b.turn_events(turn)) > 30, "B's client to follow")
        daemon_a.process.send_signal(signal.SIGKILL)
        await daemon_a.wait_exit()
        await client_a.close()

        completed = await client_b.wait_completed(turn)
        assert completed["event"]["stopReason"] == "end_turn"
        seen = client_b.turn_events(turn)
        seqs = [e["seq"] for e in seen]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        kinds = [e["event"]["kind"] for e in seen]
        assert kinds.count("retry") == 1 and kinds.count("turn_completed") == 1
        logged = [e for _, e in stored(pg_url, cid) if e.get("type") == "chat_response"]
        kept = next(e["message"] for e in logged if e.get("interrupted"))
        assert kept and TEXT.startswith(kept)
        assert logged[-1]["message"] == " The rest."
        assert shown(seen) == kept + " The rest."  # what the log says, nothing twice
    finally:
        await client_b.close()
