# ruff: noqa: ASYNC110, ASYNC220, ASYNC240 - a bench driver: it polls and blocks on purpose
"""Fleet figures (docs/scale.md), on a throwaway Postgres 15 (`--only fleet`; it needs
the server's binaries): events appended per second against the JSONL store, a turn's
start-to-end on a fleet member against an embedded daemon, a turn started on a full
member (queued, run on another) against one started where it runs, the time from a
SIGKILL of the member running a turn to the turn's end on another member, and a
follower's delay on another member."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.fig_start import scripted_env
from bench.report import Row, med, ms, pct
from bench.rpcclient import ROOT, Client

LEASE_TTL = 2.0


async def _appends(store: Any, cid: str, count: int) -> float:
    from jpd.conversation import events as ev

    await store.create(cid)
    lease = await store.lock_turn(cid)
    event = ev.ChatCheckpoint(turn_id="t-1", message="x" * 200)
    start = time.perf_counter()
    for _ in range(count):
        store.append(cid, event)
    await store.sync(cid)
    spent = time.perf_counter() - start
    await lease.release()
    return count / spent


async def _all_appends(url: str, home: Path, count: int, rounds: int) -> tuple[list, list]:
    from jpd.conversation.jsonl.threaded import ThreadedStore
    from jpd.conversation.pg import PgStore

    pg = PgStore(url, home / "pg", host="bench")
    local = ThreadedStore(home / "jsonl")
    pg_rates, jsonl_rates = [], []
    try:
        await pg.open()
        for n in range(rounds):
            pg_rates.append(await _appends(pg, f"c-{n}", count))
            jsonl_rates.append(await _appends(local, f"c-{n}", count))
    finally:
        await pg.close()
        await local.close()
    return pg_rates, jsonl_rates


def appends(url: str, home: Path, count: int, rounds: int) -> list[Row]:
    pg_rates, jsonl_rates = asyncio.run(_all_appends(url, home, count, rounds))
    p, j = med(pg_rates), med(jsonl_rates)
    return [
        Row(
            "fleet: events appended per second, one conversation (Postgres store)",
            f"{p:,.0f}/s",
            f"JSONL store {j:,.0f}/s",
            p / j,
            "a turn appends a few events per second; checkpoints are 2/s",
        )
    ]


def _member(
    home: Path, base: dict[str, str], url: str | None, responses: list[dict], fleet: str = ""
) -> dict:
    home.mkdir(parents=True)
    env = scripted_env(home, base, 1)
    (home / "script.json").write_text(json.dumps({"responses": responses}))
    if url:
        env["JPD_STORE_URL"] = url
        config = Path(env["JP_CONFIG"])
        config.write_text(config.read_text() + f"[daemon.fleet]\nlease_ttl = {LEASE_TTL}\n{fleet}")
    return env


async def _connect(env: dict[str, str]) -> Client:
    socket = Path(env["JP_SOCKET"])
    while not socket.exists():
        await asyncio.sleep(0.02)
    client = await Client.connect(socket)
    await client.initialize()
    return client


async def _timed(client: Client, message: str) -> tuple[float, float]:
    """(request to first text, request to end) of one turn in a new conversation."""
    start = time.perf_counter()
    result = await client.request("turn/start", {"message": message})
    first, end = await client.until_completed(result["turnId"])
    return first - start, end - start


async def _queued(url: str, home: Path, base: dict[str, str], rounds: int) -> dict[str, list]:
    """Member A runs one turn at most and is busy; each turn started on A waits in the
    queue and runs on B. Reference: the same turns started on B (room: run at once)."""
    busy = {"text": " ".join(f"w{i}" for i in range(600)), "chunk": 1, "delay_ms": 50}
    envs = [
        _member(home / "q-a", base, url, [busy], fleet="max_turns = 1\n"),
        _member(home / "q-b", base, url, [{"text": "ok"}] * (2 * rounds)),
    ]
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "jpd", "--listen"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL
        )
        for env in envs
    ]
    try:
        holder, on_a = await _connect(envs[0]), await _connect(envs[0])
        on_b = await _connect(envs[1])
        await holder.request("turn/start", {"message": "be busy"})
        found: dict[str, list] = {"queued": [], "direct": []}
        for n in range(rounds):
            found["queued"].append(await _timed(on_a, f"queued {n}"))
            found["direct"].append(await _timed(on_b, f"direct {n}"))
        return found
    finally:
        for process in processes:
            process.terminate()
            process.wait(30)


def queued(url: str, home: Path, base: dict[str, str], rounds: int) -> list[Row]:
    found = asyncio.run(_queued(url, home, base, rounds))
    q_first, q_end = (med([t[i] for t in found["queued"]]) for i in (0, 1))
    d_first, d_end = (med([t[i] for t in found["direct"]]) for i in (0, 1))
    return [
        Row(
            "fleet: turn/start on a full member -> first text, the turn queued and run on another",
            ms(q_first),
            f"started where it runs {ms(d_first)}",
            q_first / d_first,
            "claimed when NOTIFY wakes the member with room",
        ),
        Row(
            "fleet: the same, start to end",
            ms(q_end),
            f"started where it runs {ms(d_end)}",
            q_end / d_end,
            "-",
        ),
    ]


async def _turns(env: dict[str, str], rounds: int) -> list[float]:
    process = subprocess.Popen(
        [sys.executable, "-m", "jpd", "--listen"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL
    )
    try:
        socket = Path(env["JP_SOCKET"])
        while not socket.exists():
            await asyncio.sleep(0.02)
        client = await Client.connect(socket)
        await client.initialize()
        cid, _ = await client.turn("first")
        spent = [(await client.turn("again", cid))[1] for _ in range(rounds)]
        await client.close()
        return spent
    finally:
        process.terminate()
        process.wait(30)


def turn_latency(url: str, home: Path, base: dict[str, str], rounds: int) -> list[Row]:
    ok = [{"text": "ok"}] * (rounds + 1)
    fleet = asyncio.run(_turns(_member(home / "t-pg", base, url, ok), rounds))
    alone = asyncio.run(_turns(_member(home / "t-jsonl", base, None, ok), rounds))
    return [
        Row(
            "fleet: a turn's start to end on a member (Postgres store)",
            ms(med(fleet)),
            f"embedded daemon {ms(med(alone))}",
            med(fleet) / med(alone),
            "no queue poll before a turn starts",
        )
    ]


async def _takeover(home: Path, base: dict[str, str], url: str) -> float:
    tool = home / "slow.py"
    tool.parent.mkdir(parents=True, exist_ok=True)
    pid_file = home / "tool.pid"
    tool.write_text(
        f"import os, sys, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "sys.stdin.read()\ntime.sleep(600)\n"
    )
    call = {"tool_calls": [{"id": "call_1", "name": "slow", "arguments": {}}]}
    members = []
    for name, responses in (("a", [call]), ("b", [{"text": "done"}])):
        env = _member(home / name, base, url, responses)
        config = Path(env["JP_CONFIG"])
        config.write_text(
            config.read_text()
            + f'[conversation.tools.slow]\ncommand = "{sys.executable} {tool}"\n'
            + 'run = "unattended"\n'
        )
        process = subprocess.Popen(
            [sys.executable, "-m", "jpd", "--listen"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL
        )
        members.append((env, process))
    try:
        clients = []
        for env, _ in members:
            socket = Path(env["JP_SOCKET"])
            while not socket.exists():
                await asyncio.sleep(0.02)
            client = await Client.connect(socket)
            await client.initialize()
            clients.append(client)
        started = await clients[0].request("turn/start", {"message": "run"})
        while not pid_file.exists():  # the tool runs
            await asyncio.sleep(0.02)
        members[0][1].send_signal(signal.SIGKILL)
        killed = time.perf_counter()
        import psycopg

        while True:
            with psycopg.connect(url) as conn:
                row = conn.execute(
                    "SELECT body FROM jpd_events WHERE conversation_id = %s "
                    "ORDER BY seq DESC LIMIT 1",
                    (started["conversationId"],),
                ).fetchone()
            if row and '"stop_reason":"end_turn"' in row[0]:
                return time.perf_counter() - killed
            await asyncio.sleep(0.02)
    finally:
        for _, process in members:
            process.kill()
            process.wait(30)
        if pid_file.exists():  # the tool A left running (B did not run it again)
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)


def takeover(url: str, home: Path, base: dict[str, str]) -> list[Row]:
    spent = asyncio.run(_takeover(home / "takeover", base, url))
    return [
        Row(
            "fleet: SIGKILL of the member running a turn -> its end on another member",
            f"{spent:.2f} s",
            f"lease_ttl {LEASE_TTL:.0f} s",
            spent / LEASE_TTL,
            "within lease_ttl + 2 s",
        )
    ]


async def _deltas(client: Client, seen: dict[tuple[str, int], float], turns: int) -> None:
    """Stamp each text delta's arrival as (turn, its index in the turn): time."""
    counts: dict[str, int] = {}
    done = 0

    def note(message: dict[str, Any]) -> int:
        params = message.get("params") or {}
        kind = (
            params.get("event", {}).get("kind") if message.get("method") == "turn/event" else None
        )
        if kind == "text_delta":
            turn = params["turnId"]
            index = counts.get(turn, 0)
            counts[turn] = index + 1
            seen.setdefault((turn, index), time.perf_counter())
        return 1 if kind == "turn_completed" else 0

    queued, client.notifications = client.notifications, []
    for message in queued:  # arrived before the stamping began: counted, not stamped
        done += note(message)
    seen.clear()
    while done < turns:
        done += note(json.loads(await client.read_body()))


async def _follow(url: str, home: Path, base: dict[str, str], turns: int) -> list[float]:
    text = " ".join(f"w{i}" for i in range(120))  # 40 deltas, one per 100 ms: 4 s
    stream = {"text": text, "chunk": 12, "delay_ms": 100}
    envs = [
        _member(home / "f-a", base, url, [stream] * turns),
        _member(home / "f-b", base, url, []),
    ]
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "jpd", "--listen"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL
        )
        for env in envs
    ]
    try:
        clients = []
        for env in envs:
            socket = Path(env["JP_SOCKET"])
            while not socket.exists():
                await asyncio.sleep(0.02)
            client = await Client.connect(socket)
            await client.initialize()
            clients.append(client)
        runner, follower = clients
        started = [await runner.request("turn/start", {"message": "go"}) for _ in range(turns)]
        for turn in started:
            await follower.request("turn/attach", {"conversationId": turn["conversationId"]})
        at_runner: dict[tuple[str, int], float] = {}
        at_follower: dict[tuple[str, int], float] = {}
        await asyncio.gather(
            _deltas(runner, at_runner, turns), _deltas(follower, at_follower, turns)
        )
        return [at_follower[k] - t for k, t in at_runner.items() if k in at_follower]
    finally:
        for process in processes:
            process.terminate()
            process.wait(30)


def follow(url: str, home: Path, base: dict[str, str], turns: int) -> list[Row]:
    delays = asyncio.run(_follow(url, home, base, turns))
    return [
        Row(
            f"fleet: a follower on another member, {turns} streaming turns (p50 / p99)",
            f"{ms(pct(delays, 0.5))} / {ms(pct(delays, 0.99))}",
            "the member running them",
            None,
            "events relayed in 50 ms batches",
        )
    ]


def fleet(base: dict[str, str], quick: bool) -> list[Row]:
    sys.path.insert(0, str(ROOT))
    from tests.fleet.pgserver import running_server

    with running_server() as server, tempfile.TemporaryDirectory(prefix="jpd-fleet-") as tmp:
        if isinstance(server, str):
            return [Row("fleet", f"skipped: {server}", "-", None, "-")]
        home = Path(tmp)
        rows = appends(server.create_database("appends"), home, 500 if quick else 2000, 3)
        rows += turn_latency(server.create_database("turns"), home, base, 5 if quick else 20)
        rows += queued(server.create_database("queue"), home, base, 5 if quick else 20)
        rows += takeover(server.create_database("takeover"), home, base)
        rows += follow(server.create_database("follow"), home, base, 20 if quick else 200)
        return rows
