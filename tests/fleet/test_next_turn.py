"""A client that starts its next turn as soon as `turn_completed` arrived finds the
conversation free: the member waits for the lease the ended turn is giving back (a
database call) rather than answering `Busy` (-32005) for its own last turn."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.sockets import Daemons
from tests.fleet.test_takeover import member, start

TURNS = 30


async def test_turns_started_back_to_back_in_one_conversation_all_run(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    env = member(tmp_path / "a", pg_url, [{"text": "ok"}] * (TURNS + 1))
    _, client = await start(daemons, env)
    first = await client.request("turn/start", {"message": "first"})
    cid = first["conversationId"]
    ended = [(await client.wait_completed(first["turnId"]))["event"]["stopReason"]]
    for n in range(TURNS):
        turn = await client.request("turn/start", {"message": f"next {n}", "conversationId": cid})
        ended.append((await client.wait_completed(turn["turnId"]))["event"]["stopReason"])
    assert ended == ["end_turn"] * (TURNS + 1)
