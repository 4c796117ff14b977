"""Start-up and per-request figures: spawn to `initialize`, `jp --stdio query`,
daemon CPU per `turn/list` against a bare pygls server, and `daemon/status`."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

from bench.report import Row, med, ms, us
from bench.rpcclient import ROOT, Client, cpu_seconds

FLOOR = [sys.executable, "-c", "import pygls.protocol, pydantic"]


def scripted_env(home: Path, base: dict[str, str], responses: int) -> dict[str, str]:
    """Config for the scripted `test` provider answering `ok` `responses` times."""
    script = home / "script.json"
    script.write_text(json.dumps({"responses": [{"text": "ok"}] * responses}))
    config = home / "config.toml"
    config.write_text(
        f'[assistant.model]\nid = "test/x"\n[providers.test]\nscript = "{script}"\n'
        "[daemon]\nidle_timeout = 0\n"
    )
    env = {**base, "JP_CONFIG": str(config), "JP_DATA_DIR": str(home / "data")}
    env["JP_LOG_DIR"] = str(home / "logs")
    env["JP_STATE_DIR"] = str(home / "state")  # `jp` remembers conversations here, not in ~
    env["JP_SOCKET"] = str(home / "jpd.sock")
    return env


def _wall(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


async def _spawn_to_initialize(env: dict[str, str]) -> float:
    start = time.perf_counter()
    client, process = await Client.spawn(env)
    await client.request("initialize", {"protocolVersion": 1, "clientInfo": {"name": "b"}})
    spent = time.perf_counter() - start
    await client.close()
    await process.wait()
    return spent


def startup(env: dict[str, str], rounds: int) -> list[Row]:
    """Spawn-to-initialize and `jp --stdio query`, interleaved with the floor."""
    jp = [sys.executable, "-m", "jpcli", "--stdio", "query", "--new", "ping"]
    floor: list[float] = []
    spawn: list[float] = []
    query: list[float] = []
    _wall(FLOOR, env)
    for _ in range(rounds):
        floor.append(_wall(FLOOR, env))
        spawn.append(asyncio.run(_spawn_to_initialize(env)))
        query.append(_wall(jp, env))
    f = med(floor)
    goal = "python -c 'import pygls.protocol, pydantic'"
    return [
        Row("jpd spawn to initialize answered", ms(med(spawn)), f"{goal} {ms(f)}",
            med(spawn) / f, "≤ 1.1x"),
        Row("jp --stdio query (scripted)", ms(med(query)), f"same floor {ms(f)}",
            med(query) / f, "≤ 1.3x"),
    ]  # fmt: skip


async def _cpu_per_call(client: Client, pid: int, method: str, calls: int) -> float:
    before = cpu_seconds(pid)
    for _ in range(calls):
        await client.request(method)
    return (cpu_seconds(pid) - before) / calls


async def _requests(env: dict[str, str], calls: int, rounds: int) -> list[Row]:
    jpd, jpd_proc = await Client.spawn(env)
    await jpd.initialize()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.pygls_floor",
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT, env=env,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    floor = Client(proc.stdout, proc.stdin)
    await floor.request("initialize", {})
    ours: list[float] = []
    theirs: list[float] = []
    status: list[float] = []
    for client, pid in ((jpd, jpd_proc.pid), (floor, proc.pid)):
        await _cpu_per_call(client, pid, "turn/list", 200)  # warm-up
    await _cpu_per_call(jpd, jpd_proc.pid, "daemon/status", 50)
    for _ in range(rounds):
        ours.append(await _cpu_per_call(jpd, jpd_proc.pid, "turn/list", calls))
        theirs.append(await _cpu_per_call(floor, proc.pid, "turn/list", calls))
        status.append(await _cpu_per_call(jpd, jpd_proc.pid, "daemon/status", calls))
    for client, process in ((jpd, jpd_proc), (floor, proc)):
        await client.close()
        await process.wait()
    return [
        Row("daemon CPU per turn/list", us(med(ours)),
            f"bare pygls JsonRPCServer {us(med(theirs))}", med(ours) / med(theirs), "≤ 1.1x"),
        Row("daemon CPU per daemon/status", us(med(status)), f"turn/list {us(med(ours))}",
            med(status) / med(ours), "constant (no per-call metadata read)"),
    ]  # fmt: skip


def requests(env: dict[str, str], calls: int, rounds: int) -> list[Row]:
    """Daemon CPU per `turn/list` and `daemon/status` beside a bare pygls server."""
    return asyncio.run(_requests(env, calls, rounds))
