"""Many turns at once on one daemon: CPU per streamed token against bare HTTP readers.

A fake Anthropic server in its own process streams `TOKENS` text events per answer,
`INTERVAL` apart. For each count of concurrent turns (100 and 1,000 by default):

- `jpd`: one stdio client of a private daemon starts that many turns (each in a new
  conversation) at once and reads every `turn/event` until each turn ended; meanwhile it
  sends `turn/list` every 50 ms on the same connection and times each answer. Measured:
  the daemon's CPU (its threads' run time, `rpcclient.cpu_seconds`) over the batch, per
  streamed token; the p99 of the `turn/list` answers; whether every turn ended with
  `end_turn` and all of its text. With `BENCH_TURNS_STDIO_CANCEL=1` the largest batch
  also times `turn/cancel` of a running turn (`bench.turns_cancel`) on that connection:
  not by default, as each of its turns costs the daemon about a whole turn's CPU (5.6-6.7
  ms against 7.3 ms) and some 50 in a batch of 1,000 add ~5% to the CPU per token; the
  socket run always times it.
- the reference readers, in this process, over the same streams: httpx with its default
  transport, and httpx on the aiohttp transport (`httpx-aiohttp`), each reading the
  bodies raw (no SSE parsing) with one client and a pool sized for the count. Their CPU
  is this process's over the batch.

Run alone from the repository root (a few minutes on 2 cores):

    python -m bench.fig_turns [--turns 100,1000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_jpd_stream import environment, start_server  # noqa: E402
from bench.report import Row, pct  # noqa: E402
from bench.rpcclient import cpu_seconds, frame  # noqa: E402
from bench.turns_cancel import Canceller  # noqa: E402

TOKENS = 100
INTERVAL = 0.05
PROBE_EVERY = 0.05
"""Seconds between two timed `turn/list` requests."""
COUNTS = (100, 1000)
SOCKET_PROBES = True
"""Also run the largest batch on a socket daemon, probing from other connections."""
INIT = {"protocolVersion": 1, "clientInfo": {"name": "bench", "version": "1"}}
_DELTA = re.compile(rb'"turnId":"([^"]+)".*"kind":"text_delta","text":"([^"\\]*)"}}}$')


class _Daemon:
    """A stdio client of a private `jpd` that reads frames in one task: answers go to the
    futures of their requests, `turn/event` notifications are only scanned."""

    def __init__(
        self,
        process: asyncio.subprocess.Process | None,
        streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None,
    ) -> None:
        self.process = process
        """The daemon (None: a connection of `turns_socket`'s probe process)."""
        if streams is None:
            assert process is not None and process.stdin is not None and process.stdout is not None
            self._in, self._out = process.stdout, process.stdin
        else:  # a connection to the daemon's socket (bench.turns_socket)
            self._in, self._out = streams
        self._next = 0
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self.ended: dict[str, str] = {}
        """turn id -> stop reason, for every `turn_completed` read."""
        self.text: dict[str, int] = {}
        """turn id -> characters of text read."""
        self.any_end = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, env: dict[str, str]) -> _Daemon:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "jpd", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            env=env, cwd=ROOT, limit=2**24,
        )  # fmt: skip
        daemon = cls(process)
        await daemon.handshake()
        return daemon

    async def handshake(self) -> None:
        await self.request("initialize", INIT)
        self._out.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))

    def send(self, method: str, params: Any) -> asyncio.Future[Any]:
        self._next += 1
        future = asyncio.get_running_loop().create_future()
        self._waiting[self._next] = future
        msg = {"jsonrpc": "2.0", "id": self._next, "method": method, "params": params}
        self._out.write(frame(msg))
        return future

    async def request(self, method: str, params: Any = None) -> Any:
        return await self.send(method, params)

    async def _read(self) -> None:
        # Frames are cut from large reads, and a delta is not decoded (the fake answer's
        # text has no escapes): this client must keep up with 20,000 deltas a second on
        # the same two cores, or its own backlog would time it, not the daemon.
        reader, buffer, ended, text = self._in, b"", self.ended, self.text
        while chunk := await reader.read(1 << 20):
            buffer = buffer + chunk if buffer else chunk
            start = 0
            while (sep := buffer.find(b"\r\n\r\n", start)) >= 0:
                length = int(buffer[buffer.index(b":", start) + 1 : sep])
                end = sep + 4 + length
                if end > len(buffer):
                    break
                body, start = buffer[sep + 4 : end], end
                if body.startswith(b'{"jsonrpc":"2.0","method":"turn/event"'):
                    match = _DELTA.search(body)
                    if match is not None:
                        turn = match[1].decode()
                        text[turn] = text.get(turn, 0) + len(match[2])
                    elif b'"turn_completed"' in body:
                        params = json.loads(body)["params"]
                        ended[params["turnId"]] = params["event"]["stopReason"]
                        self.any_end.set()
                    continue
                self._answer(json.loads(body))
            buffer = buffer[start:]

    def _answer(self, message: dict[str, Any]) -> None:
        if "method" in message:
            return  # another notification or a request (none expected)
        future = self._waiting.pop(message["id"], None)
        if future is not None and not future.done():
            if "error" in message:
                future.set_exception(RuntimeError(str(message["error"])))
            else:
                future.set_result(message.get("result"))

    async def close(self) -> None:
        assert self.process is not None
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.request("shutdown"), 30)
            self._out.write(frame({"jsonrpc": "2.0", "method": "exit"}))
            self._out.close()
        try:
            await asyncio.wait_for(self.process.wait(), 30)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
        self._reader.cancel()


Latencies = tuple[list[float], list[float]]
"""A probe's answer times: sent while turns were being started, then after."""
Probe = Callable[[], Awaitable[Any]]
"""A request timed every `PROBE_EVERY` seconds during a batch (one that returns a float
timed itself: those seconds count)."""


class Phases(Protocol):
    """The probes of a batch, told its moments (`Probing`, or another process's)."""

    async def start(self) -> None: ...
    async def streaming(self) -> None: ...
    async def finish(self) -> dict[str, Latencies]: ...


class Probing:
    """Probes timed in this process's event loop: `start` them as the batch starts,
    `streaming` once every turn started, `finish` at its end (their latencies)."""

    def __init__(self, probes: dict[str, Probe]) -> None:
        self._probes = probes
        self.timed: dict[str, Latencies] = {name: ([], []) for name in probes}
        self._started = False
        self._done = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._tasks = [asyncio.create_task(self._probe(*item)) for item in self._probes.items()]

    async def streaming(self) -> None:
        self._started = True

    async def finish(self) -> dict[str, Latencies]:
        self._done.set()
        await asyncio.gather(*self._tasks)
        return self.timed

    async def _probe(self, name: str, request: Probe) -> None:
        starting, streaming = self.timed[name]
        while not self._done.is_set():
            sent, during = time.perf_counter(), streaming if self._started else starting
            took = await request()
            # A float: the probe timed itself (what it waited for first is not counted).
            during.append(took if isinstance(took, float) else time.perf_counter() - sent)
            await asyncio.sleep(max(0.0, PROBE_EVERY - (time.perf_counter() - sent)))


async def _batch(
    daemon: _Daemon, count: int, probing: Phases | None = None, cancel: bool = False
) -> tuple[float, dict[str, Latencies], int, float]:
    """Start `count` turns at once, timing the probes (default: a `turn/list` on the
    same connection, every `PROBE_EVERY` seconds, and with `cancel` `turn/cancel` of a
    turn of its own) from the first `turn/start` to the last turn's end; (daemon CPU,
    each probe's latencies, turns that ended normally with all their text, wall
    seconds)."""
    assert daemon.process is not None
    pid = daemon.process.pid
    daemon.ended.clear()
    daemon.text.clear()
    expected = len("".join(f" tok{i}" for i in range(TOKENS)))
    canceller = Canceller(daemon) if cancel else None
    if probing is None:
        probes: dict[str, Probe] = {"turn/list": lambda: daemon.request("turn/list")}
        if canceller is not None:
            probes["turn/cancel"] = canceller.probe
        probing = Probing(probes)
    cpu0, start = cpu_seconds(pid), time.perf_counter()
    await probing.start()
    starts = [daemon.send("turn/start", {"message": "bench"}) for _ in range(count)]
    turn_ids = {result["turnId"] for result in await asyncio.gather(*starts)}
    await probing.streaming()
    while not turn_ids <= daemon.ended.keys():
        daemon.any_end.clear()
        await daemon.any_end.wait()
    wall = time.perf_counter() - start
    cpu = cpu_seconds(pid) - cpu0
    timed = await probing.finish()
    if canceller is not None:
        await canceller.settle()
    if os.environ.get("BENCH_TURNS_TRACE"):
        for name, (starting, streaming) in timed.items():
            print(name, [round(x * 1000) for x in starting + streaming], file=sys.stderr)
    normal = sum(
        1
        for turn in turn_ids
        if daemon.ended[turn] == "end_turn" and daemon.text.get(turn) == expected
    )
    return cpu, timed, normal, wall


def _reader_client(kind: str, count: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=count + 10, max_keepalive_connections=count + 10)
    if kind == "aiohttp":
        from httpx_aiohttp import AiohttpTransport

        return httpx.AsyncClient(transport=AiohttpTransport(limits=limits), timeout=120)
    return httpx.AsyncClient(limits=limits, timeout=120)


async def _read_streams(kind: str, url: str, count: int) -> float:
    """`count` concurrent raw reads of the stream; this process's CPU seconds."""
    body = json.dumps({"model": "claude-bench", "stream": True}).encode()

    async def one(client: httpx.AsyncClient) -> None:
        async with client.stream("POST", url, content=body) as response:
            async for _ in response.aiter_raw():
                pass

    async with _reader_client(kind, count) as client:
        await one(client)  # warm up: imports, the first connection
        cpu0 = time.process_time()
        await asyncio.gather(*(one(client) for _ in range(count)))
        return time.process_time() - cpu0


async def _measure(home: Path, base_url: str, counts: list[int]) -> dict[str, dict[int, Any]]:
    env = environment(home, base_url)
    url = f"{base_url}/v1/messages"
    results: dict[str, dict[int, Any]] = {"httpx": {}, "aiohttp": {}, "jpd": {}, "socket": {}}
    for count in counts:
        for kind in ("httpx", "aiohttp"):
            results[kind][count] = await _read_streams(kind, url, count)
    # This client reads 20,000 frames a second: its own collector's pauses would be
    # timed as the daemon's answers (the readers above keep Python's defaults).
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)
    daemon = await _Daemon.start(env)
    try:
        await _batch(daemon, 1)  # warm up: the provider, its client, the store
        cancel = os.environ.get("BENCH_TURNS_STDIO_CANCEL") == "1"
        for count in counts:
            results["jpd"][count] = await _batch(
                daemon, count, cancel=cancel and count == max(counts)
            )
    finally:
        await daemon.close()
    if SOCKET_PROBES:
        from bench.turns_socket import socket_batch

        high = max(counts)
        results["socket"][high] = await socket_batch(env, high)
    return results


def turns(home: Path, counts: tuple[int, ...] = COUNTS) -> list[Row]:
    """The figure's rows; starts (and stops) its own paced fake server."""
    server, base_url = start_server(TOKENS, 0.0, INTERVAL)
    try:
        results = asyncio.run(_measure(home, base_url, list(counts)))
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(30)
    rows: list[Row] = []
    per_token: dict[int, float] = {}
    for count in counts:
        cpu, _timed, normal, wall = results["jpd"][count]
        tokens = count * TOKENS
        per_token[count] = cpu / tokens
        floor = results["aiohttp"][count] / tokens
        plain = results["httpx"][count] / tokens
        rows.append(
            Row(f"daemon CPU per token, {count:,} concurrent turns",
                f"{per_token[count] * 1e6:.0f} µs ({normal}/{count} turns ended normally,"
                f" {wall:.1f} s)",
                f"httpx-aiohttp reader {floor * 1e6:.0f} µs; httpx {plain * 1e6:.0f} µs",
                per_token[count] / floor, "≤ 2x (at 1,000)")
        )  # fmt: skip
    low, high = min(counts), max(counts)
    if low != high:
        rows.append(
            Row(f"daemon CPU per token, {high:,} turns against {low:,}",
                f"{per_token[high] * 1e6:.0f} µs", f"{per_token[low] * 1e6:.0f} µs",
                per_token[high] / per_token[low], "≤ 1.3x")
        )  # fmt: skip
    rows += _probe_rows(high, results["jpd"][high][1], "")
    if high in results["socket"]:
        from bench.turns_socket import socket_rows

        rows += socket_rows(high, results["socket"][high], _probe_rows)
    return rows


def _probe_rows(high: int, timed: dict[str, Latencies], where: str) -> list[Row]:
    rows: list[Row] = []
    for name, (starting, streaming) in timed.items():
        for label, latencies in (("stream", streaming), ("start at once", starting)):
            if latencies:
                rows.append(
                    Row(f"{name}{where} p99 while {high:,} turns {label}",
                        f"{pct(latencies, 0.99) * 1000:.1f} ms ({len(latencies)} requests,"
                        f" max {max(latencies) * 1000:.1f} ms)", "-", None, "≤ 50 ms")
                )  # fmt: skip
    return rows


def main() -> None:
    import tempfile

    from bench.report import print_table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", default="100,1000", help="comma-separated turn counts")
    args = parser.parse_args()
    counts = tuple(int(n) for n in args.turns.split(","))
    with tempfile.TemporaryDirectory(prefix="jpd-bench-") as tmp:
        print_table(turns(Path(tmp), counts))


if __name__ == "__main__":
    main()
