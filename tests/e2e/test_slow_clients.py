"""Slow and stuck clients on the socket (protocol.md section 7.3): a client that stops
reading lags, the others are not held up, and it catches up by re-attaching."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from tests.e2e.sockets import Daemons, SocketClient, socket_env

BIG = 2_000_000  # characters streamed: far more than socket buffers and the queue limit
ASK = {
    "tool_calls": [
        {"id": "call_q", "name": "ask_user", "arguments": {"question": "Ship it?"}},
    ]
}


def seqs(events: list[dict[str, Any]]) -> list[int]:
    return [e["seq"] for e in events]


def vm_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1])


async def test_a_client_that_stops_reading_lags_and_catches_up(
    tmp_path: Path, daemons: Daemons
) -> None:
    responses = [
        {"text": "first"},
        {"text": "x" * BIG, "chunk": 1000},
        ASK,
        {"text": "after the question"},
    ]
    env = socket_env(tmp_path, responses)
    config = Path(env["JP_CONFIG"])
    config.write_text(config.read_text() + "send_queue_bytes = 262144\n")
    daemon = await daemons.start(env)

    follower = await SocketClient.connect(daemon.socket)
    follower.reattach_on_lag = True  # on a busy machine even a reading client may lag
    await follower.initialize()
    first = await follower.request("turn/start", {"message": "hi"})
    cid = first["conversationId"]
    await follower.wait_completed(first["turnId"])

    stuck = await SocketClient.connect(daemon.socket)
    await stuck.initialize(
        clientInfo={"name": "stuck", "version": "1"},
        capabilities={"prompt": {"answerTypes": ["text"]}},
    )
    attached = await stuck.request("turn/attach", {"conversationId": cid})
    await stuck.pause_reading()
    rss_before = vm_rss_kib(daemon.process.pid)

    # The follower gets the whole long turn, every event once and in order.
    started = time.monotonic()
    big = await follower.request("turn/start", {"message": "long", "conversationId": cid})
    done = await follower.wait_completed(big["turnId"])
    assert done["event"]["stopReason"] == "end_turn"
    texts = [
        e["event"]["text"] for e in follower.turn_events(big["turnId"]) if "text" in e["event"]
    ]
    assert len("".join(texts)) == BIG
    assert seqs(follower.events) == list(range(1, len(follower.events) + 1))
    elapsed = time.monotonic() - started
    growth_mib = (vm_rss_kib(daemon.process.pid) - rss_before) / 1024
    # The stuck client's backlog is bounded by the queue limit, not by the turn's size
    # (the turn streamed ~2 MiB of frames to each client).
    assert growth_mib < 40, f"daemon grew by {growth_mib:.0f} MiB"

    # A question of that conversation no longer goes to the lagging client: with no
    # other client able to answer, the detached policy decides at once.
    asked = await follower.request(
        "turn/start", {"message": "ask", "conversationId": cid, "detached": "deny"}
    )
    done = await follower.wait_completed(asked["turnId"])
    assert done["event"]["stopReason"] == "end_turn"
    result = next(
        e["event"]
        for e in follower.turn_events(asked["turnId"])
        if e["event"]["kind"] == "tool_result"
    )
    assert result["isError"] is True

    # When it reads again, it gets what was queued, then `turn/lagged`; re-attaching
    # from that seq (again after each `turn/lagged`: a long replay may lag too) it
    # catches up with every event once, in order, up to the last turn's end.
    stuck.reattach_on_lag = True
    stuck.resume_reading()
    lagged = (await stuck.wait_notification("turn/lagged"))["params"]
    assert lagged["conversationId"] == cid and lagged["fromSeq"] < done["seq"]
    await stuck.wait_completed(asked["turnId"])
    assert seqs(stuck.events) == list(range(attached["lastSeq"] + 1, done["seq"] + 1))
    assert not [n for n in stuck.notifications if n["method"] == "inquiry/prompt"]
    rounds = len([n for n in stuck.notifications if n["method"] == "turn/lagged"])
    status = await stuck.request("daemon/status")
    assert status["clients"] == 2
    print(
        f"long turn: {elapsed:.1f}s; daemon RSS growth with a stuck client "
        f"{growth_mib:.1f} MiB; caught up in {rounds} re-attach(es)"
    )


async def test_a_client_whose_socket_stays_full_is_dropped_after_the_stall_timeout(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path, [{"text": "first"}, {"text": "y" * BIG, "chunk": 1000}])
    config = Path(env["JP_CONFIG"])
    config.write_text(
        config.read_text() + "send_queue_bytes = 262144\nclient_stall_timeout = 1.0\n"
    )
    daemon = await daemons.start(env)
    follower = await SocketClient.connect(daemon.socket)
    follower.reattach_on_lag = True
    await follower.initialize()
    first = await follower.request("turn/start", {"message": "hi"})
    cid = first["conversationId"]
    await follower.wait_completed(first["turnId"])
    stuck = await SocketClient.connect(daemon.socket)
    await stuck.initialize()
    await stuck.request("turn/attach", {"conversationId": cid})
    await stuck.pause_reading()

    big = await follower.request("turn/start", {"message": "long", "conversationId": cid})
    await follower.wait_completed(big["turnId"])
    for _ in range(100):
        if (await follower.request("daemon/status"))["clients"] == 1:
            break
        await asyncio.sleep(0.1)
    assert (await follower.request("daemon/status"))["clients"] == 1
    log = (tmp_path / "logs" / "jpd.log").read_text()
    assert "no write progress for 1s; closing it" in log
