"""History figures: a long conversation's turns against a short one's, the first
`conversation/get` of a 100,000-event log against `json.loads` of its lines, another
client's `turn/list` latency while turns run on a large conversation, and a later turn
on it against a turn on a new conversation. The provider is the scripted one, so a
turn's cost is the daemon's alone (no request body is encoded)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.fig_start import scripted_env
from bench.fig_stream import _listen
from bench.report import Row, med, ms, pct
from bench.rpcclient import Client
from jpd.conversation.jsonl.store import ConversationStore

BIG_TURNS = 25_000  # 4 events a turn: 100,000 events


def write_log(store: ConversationStore, cid: str, turns: int) -> None:
    """A conversation of `turns` short finished turns, written as its JSONL log."""
    store.create(cid)
    stamp = datetime.now(UTC).isoformat()
    lines = []
    for i in range(turns):
        tid = f"t-{i:012x}"
        lines += [
            {"type": "turn_start", "timestamp": stamp, "turn_id": tid, "model": "test/x"},
            {"type": "chat_request", "timestamp": stamp, "content": f"question {i}"},
            {"type": "chat_response", "timestamp": stamp, "message": f"answer {i}",
             "usage": {"input_tokens": 10, "output_tokens": 2}},
            {"type": "turn_end", "timestamp": stamp, "turn_id": tid, "stop_reason": "end_turn"},
        ]  # fmt: skip
    path = store.conversation_dir(cid) / "events.jsonl"
    # Compact, as the daemon writes its lines (and as its tail scans expect them).
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    store.metadata(cid)  # rebuilds the record now, not in the daemon
    store.release(cid)  # and writes it as metadata.json


def build(data: Path, copies: int) -> None:
    """`long` (990 turns), `short` (10 turns), `big0..` and `busy` (100,000 events)."""
    store = ConversationStore(data)
    write_log(store, "20260101-000000-long", 990)
    write_log(store, "20260101-000000-short", 10)
    write_log(store, "20260101-000000-big0", BIG_TURNS)
    src = store.conversation_dir("20260101-000000-big0")
    for name in [f"big{k}" for k in range(1, copies)] + ["busy"]:
        dst = store.conversation_dir(f"20260101-000000-{name}")
        shutil.copytree(src, dst)
        (dst / "metadata.json").unlink()
        store.metadata(f"20260101-000000-{name}")  # its own, rebuilt here
        store.release(f"20260101-000000-{name}")
    store.close()


def _json_lines(path: Path) -> float:
    start = time.perf_counter()
    for line in path.read_bytes().splitlines():
        json.loads(line)
    return time.perf_counter() - start


async def _poll(client: Client, stop: asyncio.Event, samples: list[float]) -> None:
    while not stop.is_set():
        start = time.perf_counter()
        await client.request("turn/list")
        samples.append(time.perf_counter() - start)
        await asyncio.sleep(0.002)


async def _run(env: dict[str, str], home: Path, copies: int, later: int) -> list[Row]:
    data = Path(env["JP_DATA_DIR"])
    daemon = await _listen(env, home / "hist.sock")
    a = await Client.connect(home / "hist.sock")
    b = await Client.connect(home / "hist.sock")
    rows: list[Row] = []
    try:
        await a.initialize()
        await b.initialize()
        long_t: list[float] = []
        short_t: list[float] = []
        for _ in range(10):
            long_t.append((await a.turn("more", "20260101-000000-long"))[1])
            short_t.append((await a.turn("more", "20260101-000000-short"))[1])
        rows.append(Row("one conversation, turns 990-1000", ms(med(long_t)),
                        f"turns 10-20 of a short one {ms(med(short_t))}",
                        med(long_t) / med(short_t), "≤ 1.5x"))  # fmt: skip

        gets: list[float] = []
        loads: list[float] = []
        for k in range(copies):
            cid = f"20260101-000000-big{k}"
            loads.append(_json_lines(data / "conversations" / cid / "events.jsonl"))
            start = time.perf_counter()
            await a.raw_answer(await a.start_request("conversation/get", {"conversationId": cid}))
            gets.append(time.perf_counter() - start)
        rows.append(Row("first conversation/get of 100,000 events", ms(med(gets)),
                        f"json.loads of its lines {ms(med(loads))}",
                        med(gets) / med(loads), "≤ 2x"))  # fmt: skip

        stop = asyncio.Event()
        samples: list[float] = []
        poller = asyncio.create_task(_poll(b, stop, samples))
        busy: list[float] = []
        fresh: list[float] = []
        await a.turn("first", "20260101-000000-busy")  # its first turn loads the log
        for _ in range(later):
            busy.append((await a.turn("again", "20260101-000000-busy"))[1])
            fresh.append((await a.turn("new"))[1])
        stop.set()
        await poller
        rows.append(
            Row(
                "another client's turn/list p99 while turns run",
                ms(pct(samples, 0.99)),
                f"p50 {ms(med(samples))}, longest {ms(max(samples))}, {len(samples)} calls",
                None,
                "≤ 50 ms",
            )
        )
        rows.append(Row("a later turn on that 100,000-event conversation", ms(med(busy)),
                        f"a turn on a new conversation {ms(med(fresh))}",
                        med(busy) / med(fresh), "≤ 3x"))  # fmt: skip
    finally:
        await a.close()
        await b.close()
        os.kill(daemon.pid, signal.SIGTERM)
        daemon.wait(30)
    return rows


def history(home: Path, base_env: dict[str, str], copies: int, later: int) -> list[Row]:
    """Build the logs, then measure against a socket daemon on the scripted provider."""
    env = scripted_env(home, base_env, 100 + 2 * later)
    build(Path(env["JP_DATA_DIR"]), copies)
    return asyncio.run(_run(env, home, copies, later))
