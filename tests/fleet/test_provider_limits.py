"""`[daemon.fleet.provider_limits]`: with a limit of one call at once to a provider,
two members' turns never stream from it at the same time, and both finish."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

from tests.e2e.sockets import Daemons, add_config
from tests.fleet.test_takeover import member, start, stored

TEXT = " ".join(f"word{i}" for i in range(60))


def call_span(url: str, cid: str) -> tuple[datetime, datetime]:
    """From the model call's first checkpoint to its response, by the log's stamps."""
    events = [e for _, e in stored(url, cid)]
    first = next(e for e in events if e["type"] == "chat_checkpoint")
    last = next(e for e in events if e["type"] == "chat_response")
    return datetime.fromisoformat(first["timestamp"]), datetime.fromisoformat(last["timestamp"])


async def test_one_call_at_a_time_across_members(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    stream = {"text": TEXT, "chunk": 8, "delay_ms": 20}  # about 1.4 s, checkpointed
    envs = [member(tmp_path / name, pg_url, [stream]) for name in ("a", "b")]
    for env in envs:
        add_config(env, "[daemon.fleet.provider_limits]\ntest = 1\n")
    (_, client_a), (_, client_b) = [await start(daemons, env) for env in envs]
    try:
        started = await asyncio.gather(
            client_a.request("turn/start", {"message": "stream"}),
            client_b.request("turn/start", {"message": "stream"}),
        )
        for client, turn in zip((client_a, client_b), started, strict=True):
            done = await client.wait_completed(turn["turnId"])
            assert done["event"]["stopReason"] == "end_turn"
        (a_from, a_to), (b_from, b_to) = [call_span(pg_url, t["conversationId"]) for t in started]
        assert a_to <= b_from or b_to <= a_from  # one after the other
    finally:
        await client_a.close()
        await client_b.close()
