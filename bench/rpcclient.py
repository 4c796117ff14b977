"""A small asyncio JSON-RPC client of `jpd` (Content-Length framing) for the benches.

It speaks over a spawned daemon's stdio or a Unix socket, keeps notifications it
reads while waiting for an answer in a queue, and reads a process's CPU time from
`/proc` (Linux) so benches can report the daemon's CPU rather than wall time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """CPU seconds used so far by the threads of process `pid` (Linux `/proc`): the sum
    of each thread's `schedstat` run time, in nanoseconds, so a turn of a few tens of
    milliseconds is not rounded to clock ticks (10 ms). A thread that ended is not in
    the sum: the daemon's worker threads live on for 10 s after their last job, longer
    than any figure's window. Without `schedstat`, the process's tick-rounded time."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        for task in tasks:
            with contextlib.suppress(FileNotFoundError):  # the thread ended meanwhile
                total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    return total / 1e9


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


class Client:
    """One JSON-RPC connection: requests, notifications and raw frame reads."""

    def __init__(self, reader: asyncio.StreamReader, writer: Any) -> None:
        self._reader = reader
        self._writer = writer
        self._next_id = 0
        self.notifications: list[dict[str, Any]] = []

    @classmethod
    async def spawn(cls, env: dict[str, str], *args: str) -> tuple[Client, Any]:
        """Start `python -m jpd` on stdio; returns (client, process)."""
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "jpd", *args,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, cwd=ROOT,
        )  # fmt: skip
        assert process.stdin is not None and process.stdout is not None
        return cls(process.stdout, process.stdin), process

    @classmethod
    async def connect(cls, path: Path) -> Client:
        reader, writer = await asyncio.open_unix_connection(str(path), limit=2**26)
        return cls(reader, writer)

    async def send(self, message: dict[str, Any]) -> None:
        self._writer.write(frame(message))
        await self._writer.drain()

    async def read_body(self) -> bytes:
        """The next frame's body, undecoded."""
        header = await self._reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in header.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return await self._reader.readexactly(length)

    async def start_request(self, method: str, params: Any = None) -> int:
        self._next_id += 1
        msg = {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}
        await self.send(msg)
        return self._next_id

    async def raw_answer(self, msg_id: int) -> bytes:
        """Read frames until the answer to `msg_id`; returns its undecoded body."""
        marker = re.compile(rb'"id":\s*%d[,}]' % msg_id)
        while True:
            body = await self.read_body()
            if b'"turn/event"' in body[:200]:
                self.notifications.append(json.loads(body))
                continue
            if marker.search(body[:300]) or marker.search(body[-300:]):
                return body
            self.notifications.append(json.loads(body))

    async def request(self, method: str, params: Any = None) -> Any:
        msg_id = await self.start_request(method, params)
        answer = json.loads(await self.raw_answer(msg_id))
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer.get("result")

    async def initialize(self, name: str = "bench") -> None:
        init = {"protocolVersion": 1, "clientInfo": {"name": name, "version": "1"}}
        await self.request("initialize", init)
        await self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})

    async def until_completed(self, turn_id: str | None = None) -> tuple[float, float]:
        """Read events until `turn_completed`: (time of first text, time of completion)
        as `perf_counter` values; drains notifications already queued first."""
        first = 0.0
        queued, self.notifications = self.notifications, []
        for message in queued:
            if message.get("method") == "turn/event":
                kind = message["params"]["event"]["kind"]
                if kind == "text_delta" and not first:
                    first = time.perf_counter()
                if kind == "turn_completed" and message["params"]["turnId"] == turn_id:
                    return first or time.perf_counter(), time.perf_counter()
        while True:
            body = await self.read_body()
            if not first and b'"text_delta"' in body:
                first = time.perf_counter()
            if b'"turn_completed"' in body and (turn_id is None or turn_id.encode() in body):
                return first or time.perf_counter(), time.perf_counter()

    async def turn(self, message: str, conversation_id: str | None = None) -> tuple[str, float]:
        """Run one turn to completion; (conversation id, seconds from request to end)."""
        start = time.perf_counter()
        params: dict[str, Any] = {"message": message}
        if conversation_id:
            params["conversationId"] = conversation_id
        result = await self.request("turn/start", params)
        _, end = await self.until_completed(result["turnId"])
        return result["conversationId"], end - start

    async def close(self) -> None:
        with contextlib.suppress(Exception):  # best effort at the end of a bench
            self._writer.close()
