"""Streaming figures: 2,000 tokens through jpd against bare httpx, and the daemon's
CPU when 20 clients follow one turn against 1 client."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.bench_jpd_stream import environment, measure, start_server
from bench.report import Row, med, ms
from bench.rpcclient import ROOT, Client, cpu_seconds


def tokens(home: Path, base_url: str, runs: int) -> list[Row]:
    """2,000 streamed tokens: total and first text, jpd on stdio against httpx."""
    env = environment(home, base_url)
    args = argparse.Namespace(tokens=2000, runs=runs, no_jp=True)
    results = asyncio.run(measure(base_url, env, home, args))
    first = {n: med([t[0] for t in r]) for n, r in results.items()}
    total = {n: med([t[1] for t in r]) for n, r in results.items()}
    per_token = (total["jpd"] - total["httpx"]) / 2000
    return [
        Row("2,000 streamed tokens, total", f"{ms(total['jpd'])} ({per_token * 1e6:+.0f} µs/token)",
            f"direct httpx {ms(total['httpx'])}", total["jpd"] / total["httpx"], "≤ 1.2x"),
        Row("2,000 streamed tokens, first text", ms(first["jpd"]),
            f"direct httpx {ms(first['httpx'])}", first["jpd"] / first["httpx"], "≤ 1.1x"),
    ]  # fmt: skip


async def _listen(env: dict[str, str], path: Path) -> subprocess.Popen[bytes]:
    """Start `jpd --listen path` and wait for its socket."""
    process = subprocess.Popen(  # noqa: ASYNC220 - started once, before anything is timed
        [sys.executable, "-m", "jpd", "--listen", str(path)],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    # Until it answers, not only until the file exists: a socket is bound before it
    # listens, and a connect in between is refused.
    while True:
        try:
            _reader, writer = await asyncio.open_unix_connection(str(path))
        except (FileNotFoundError, ConnectionRefusedError):
            if time.monotonic() > deadline:
                raise RuntimeError("jpd --listen did not open its socket") from None
            await asyncio.sleep(0.02)
        else:
            writer.close()
            await writer.wait_closed()
            return process


async def _followed_turn(starter: Client, followers: list[Client], cid: str, pid: int) -> float:
    """Daemon CPU seconds for one turn that `starter` runs and everyone follows."""
    before = cpu_seconds(pid)
    result = await starter.request("turn/start", {"message": "go", "conversationId": cid})
    turn_id = result["turnId"]
    await asyncio.gather(*(c.until_completed(turn_id) for c in [starter, *followers]))
    return cpu_seconds(pid) - before


async def _fan_out(env: dict[str, str], home: Path, rounds: int, count: int) -> list[Row]:
    path = home / "fan.sock"
    daemon = await _listen(env, path)
    clients: list[Client] = []
    try:
        for _ in range(count):
            client = await Client.connect(path)
            await client.initialize()
            clients.append(client)
        solo, _ = await clients[0].turn("create")
        shared, _ = await clients[0].turn("create")
        for client in clients[1:]:
            await client.request("turn/attach", {"conversationId": shared})
        one: list[float] = []
        many: list[float] = []
        for _ in range(rounds):
            one.append(await _followed_turn(clients[0], [], solo, daemon.pid))
            many.append(await _followed_turn(clients[0], clients[1:], shared, daemon.pid))
    finally:
        for client in clients:
            await client.close()
        os.kill(daemon.pid, signal.SIGTERM)
        daemon.wait(20)
    return [
        Row(f"daemon CPU, {count} clients following one turn", ms(med(many)),
            f"1 client {ms(med(one))}", med(many) / med(one), "≤ 2.5x"),
    ]  # fmt: skip


def fan_out(home: Path, base_url: str, rounds: int, count: int = 20) -> list[Row]:
    """Daemon CPU for a 2,000-token turn followed by `count` clients against 1."""
    env = environment(home, base_url)
    return asyncio.run(_fan_out(env, home, rounds, count))


__all__ = ["fan_out", "start_server", "tokens"]
