"""The largest batch of `fig_turns` on a daemon listening on its socket (as `jp` and
editors use it): one connection starts the turns and reads their events; while they
run, control requests are timed from other connections, each every 50 ms:

- `turn/list` on a second connection;
- `initialize` on a new connection each time (timed from `connect` to the answer,
  so the accept and the peer check count);
- `inquiry/answer` of an unknown id on the second connection (the answer's whole path
  but the claim's settling on the loop and the recording).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path

from bench.fig_turns import INIT, ROOT, Latencies, _batch, _Daemon
from bench.report import Row
from bench.rpcclient import frame

_CONNECT_TRIES = 600
"""Tries, 50 ms apart, for the daemon's socket to accept its first connection."""


async def _connect(path: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_unix_connection(str(path), limit=2**24)


async def _initialize_new(path: Path) -> None:
    """Connect, send `initialize`, read its answer (an error fails the run), hang up."""
    reader, writer = await _connect(path)
    try:
        writer.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}))
        header = await reader.readuntil(b"\r\n\r\n")
        length = int(header.split(b":")[1].split(b"\r\n")[0])
        answer = json.loads(await reader.readexactly(length))
        if "result" not in answer:
            raise RuntimeError(f"initialize failed: {answer}")
    finally:
        writer.close()


async def _answer_unknown(client: _Daemon) -> None:
    """`inquiry/answer` of a question nobody asked: the whole path of an answer (read,
    checked and looked up by the reader thread, the answer ahead of the events) but the
    claim's settling on the loop and the recording; -32001 is its answer."""
    try:
        await client.request("inquiry/answer", {"inquiryId": "none", "answer": True})
    except RuntimeError as exc:
        if "-32001" not in str(exc):
            raise
    else:
        raise RuntimeError("an unknown inquiry was accepted")


async def socket_batch(
    env: dict[str, str], count: int
) -> tuple[float, dict[str, Latencies], int, float]:
    """`_batch` of `count` turns on a `jpd --listen`, with the probes above."""
    path = Path(env["JP_SOCKET"])
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "jpd", "--listen", stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        for _ in range(_CONNECT_TRIES):
            try:
                streams = await _connect(path)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                await asyncio.sleep(0.05)
        else:
            raise RuntimeError(f"the daemon never listened on {path}")
        driver = _Daemon(process, streams)
        await driver.handshake()
        other = _Daemon(process, await _connect(path))
        await other.handshake()
        await _batch(driver, 1)  # warm up: the provider, its client, the store
        probes = {
            "turn/list": lambda: other.request("turn/list"),
            "initialize": lambda: _initialize_new(path),
            "inquiry/answer": lambda: _answer_unknown(other),
        }
        result = await _batch(driver, count, probes)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(driver.request("daemon/stop"), 30)
        await asyncio.wait_for(process.wait(), 60)
        return result
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def socket_rows(
    high: int,
    result: tuple[float, dict[str, Latencies], int, float],
    probe_rows: Callable[[int, dict[str, Latencies], str], list[Row]],
) -> list[Row]:
    _cpu, timed, normal, wall = result
    where = " (another socket connection)"
    rows = probe_rows(high, {"turn/list": timed["turn/list"]}, where)
    rows += probe_rows(high, {"initialize": timed["initialize"]}, " (a new socket connection)")
    unknown = {"inquiry/answer": timed["inquiry/answer"]}
    rows += probe_rows(high, unknown, " of an unknown id (another socket connection)")
    rows.append(
        Row(f"the {high:,}-turn batch on the socket", f"{normal}/{high} turns ended normally,"
            f" {wall:.1f} s", "-", None, "all")
    )  # fmt: skip
    return rows
