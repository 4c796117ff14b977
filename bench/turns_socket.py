"""The largest batch of `fig_turns` on a daemon listening on its socket (as `jp` and
editors use it): one connection starts the turns and reads their events; while they
run, control requests are timed from other connections, each every 50 ms:

- `turn/list` on a second connection;
- `initialize` on a new connection each time (timed from `connect` to the answer,
  so the accept and the peer check count);
- `inquiry/answer` of a real pending question on the second connection: a third
  connection (declaring it answers boolean prompts, but never answering) keeps
  `PENDING` `tool/call`s of a tool that asks one question outstanding; every 200 ms the
  probe answers one whose `inquiry/prompt` it saw (waiting for one is not timed) and
  must be accepted;
- `inquiry/answer` of an unknown id on the second connection (the lookup only: -32001);
- `turn/cancel` of a running turn the second connection started (`bench.turns_cancel`,
  every 200 ms): it must be cancelled, and end so.

The probes run in a process of their own (`python -m bench.turns_socket --probes
SOCKET`), told by a pipe when the batch starts, when every turn started, and when it
ends. What each times is the same as in one process (request written -> its answer
read; `connect` -> the answer to `initialize`), but a client that reads the first
connection's 20,000 frames a second is no longer in the way: in the same event loop a
probe's answer waited for the parsing of every 1 MB read ahead of it (the loop lagged
up to 80-140 ms at the thousand turns' ends), timed as the daemon's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.fig_turns import INIT, PROBE_EVERY, ROOT, Latencies, Probing, _batch, _Daemon
from bench.report import Row
from bench.rpcclient import frame
from bench.turns_cancel import Canceller

PENDING = 150
"""Questions asked ahead of the probe that answers them: with a thousand turns running a
`tool/call` takes seconds of loop rounds, so none is asked again until they end."""
_ANSWER_EVERY = 0.2
"""Seconds between two answers to pending questions (not timed)."""
_QUESTION = {"id": "q", "text": "Go on?", "answer_type": {"type": "boolean"}}
_ASKER = f"""#!/bin/sh
# Asks `q` until it has an answer (the daemon runs it again with the answers).
case "$(cat)" in
  *'"q"'*) echo answered ;;
  *) echo '{json.dumps({"type": "needs_input", "question": _QUESTION})}' ;;
esac
"""

_CONNECT_TRIES = 600
"""Tries, 50 ms apart, for the daemon's socket to accept its first connection."""


async def _connect(path: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_unix_connection(str(path), limit=2**24)


async def _initialize_new(path: Path) -> None:
    """Connect, send `initialize`, read its answer (an error fails the run; a question
    offered to the new client before it is skipped), hang up."""
    reader, writer = await _connect(path)
    try:
        writer.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}))
        while True:  # questions it can answer may come first (protocol.md section 4)
            header = await reader.readuntil(b"\r\n\r\n")
            length = int(header.split(b":")[1].split(b"\r\n")[0])
            answer = json.loads(await reader.readexactly(length))
            if answer.get("id") == 1 and "method" not in answer:
                break
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


class _Asker(_Daemon):
    """A connection that runs the asking tool and notes the questions it is prompted
    with (`inquiry/prompt`), leaving them for another connection to answer."""

    def __init__(self, process: asyncio.subprocess.Process | None, streams: _Streams) -> None:
        self.questions: asyncio.Queue[str] = asyncio.Queue()
        super().__init__(process, streams)
        self._calls: set[asyncio.Future[Any]] = set()
        self.failed = ""
        """Why a `tool/call` failed, if one did (no more questions come then)."""

    async def handshake(self) -> None:
        capabilities = {"prompt": {"answerTypes": ["boolean"]}}
        await self.request("initialize", {**INIT, "capabilities": capabilities})
        self._out.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))

    def _answer(self, message: dict[str, Any]) -> None:
        if message.get("method") == "inquiry/prompt":
            self.questions.put_nowait(message["params"]["inquiryId"])
        else:
            super()._answer(message)

    def ask(self) -> None:
        """One more `tool/call` asking a question; another when it returns."""
        call = self.send("tool/call", {"name": "asker"})
        self._calls.add(call)
        call.add_done_callback(self._asked)

    def _asked(self, call: asyncio.Future[Any]) -> None:
        self._calls.discard(call)
        if call.cancelled() or call.exception() is not None or call.result().get("isError"):
            # The daemon stopped, or the tool failed: the probe waiting is told.
            self.failed = (
                "cancelled" if call.cancelled() else repr(call.exception() or call.result())
            )
            self.questions.put_nowait("")
            return
        self.ask()


_Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _answer_pending(asker: _Asker, other: _Daemon) -> float:
    """Answer a question pending now from another connection; the seconds it took."""
    # Each answer runs the tool again (a process): answered every `PROBE_EVERY` seconds,
    # 20 spawns a second would load the daemon the other probes time.
    await asyncio.sleep(_ANSWER_EVERY - PROBE_EVERY)
    inquiry_id = await asker.questions.get()
    if not inquiry_id:
        raise RuntimeError(f"the asking tool/call failed: {asker.failed}")
    sent = time.perf_counter()
    result = await other.request("inquiry/answer", {"inquiryId": inquiry_id, "answer": True})
    took = time.perf_counter() - sent
    if result != {"accepted": True}:
        raise RuntimeError(f"a pending question's answer was not accepted: {result}")
    return took


def add_asker(env: dict[str, str]) -> None:
    """Add the asking tool to the daemon's config."""
    config = Path(env["JP_CONFIG"])
    script = config.parent / "asker.sh"
    script.write_text(_ASKER)
    table = f'[conversation.tools.asker]\ncommand = "sh {script}"\nrun = "unattended"\n'
    config.write_text(config.read_text() + table)


async def socket_batch(
    env: dict[str, str], count: int
) -> tuple[float, dict[str, Latencies], int, float]:
    """`_batch` of `count` turns on a `jpd --listen`, with the probes above."""
    path = Path(env["JP_SOCKET"])
    add_asker(env)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "jpd", "--listen", stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        env=env, cwd=ROOT,
    )  # fmt: skip
    prober: asyncio.subprocess.Process | None = None
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
        await _batch(driver, 1)  # warm up: the provider, its client, the store
        prober = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.turns_socket", "--probes", str(path),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=ROOT,
        )  # fmt: skip
        probing = _RemoteProbing(prober)
        await probing.ready()
        result = await _batch(driver, count, probing)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(driver.request("daemon/stop"), 30)
        await asyncio.wait_for(process.wait(), 60)
        return result
    finally:
        for child in (prober, process):
            if child is not None and child.returncode is None:
                child.kill()
                await child.wait()


class _RemoteProbing:
    """`Probing` in the probe process: the batch's moments go down its stdin, its
    latencies come back as JSON on its stdout."""

    def __init__(self, child: asyncio.subprocess.Process) -> None:
        assert child.stdin is not None and child.stdout is not None
        self._in, self._out = child.stdin, child.stdout

    async def _line(self) -> bytes:
        line = await asyncio.wait_for(self._out.readline(), 300)
        if not line:
            raise RuntimeError("the probe process ended early")
        return line

    async def ready(self) -> None:
        """Wait until its connections are set up and its questions pending."""
        if await self._line() != b"ready\n":
            raise RuntimeError("the probe process did not get ready")

    async def _say(self, word: bytes) -> None:
        self._in.write(word + b"\n")
        await self._in.drain()

    async def start(self) -> None:
        await self._say(b"start")

    async def streaming(self) -> None:
        await self._say(b"streaming")

    async def finish(self) -> dict[str, Latencies]:
        await self._say(b"finish")
        timed = json.loads(await self._line())
        return {name: (starting, streaming) for name, (starting, streaming) in timed.items()}


async def _probe_process(path: Path) -> None:
    """The probe process: set up, say `ready`; then run the probes on `start`, note
    `streaming`, and on `finish` print their latencies (stdin and stdout are the
    batch's)."""
    other = _Daemon(None, await _connect(path))
    await other.handshake()
    asker = _Asker(None, await _connect(path))
    await asker.handshake()
    for _ in range(PENDING):
        asker.ask()
    asked = [await asker.questions.get() for _ in range(PENDING)]
    for inquiry_id in asked:
        asker.questions.put_nowait(inquiry_id)
    canceller = Canceller(other)
    probing = Probing({
        "turn/list": lambda: other.request("turn/list"),
        "initialize": lambda: _initialize_new(path),
        "inquiry/answer": lambda: _answer_pending(asker, other),
        "inquiry/answer unknown": lambda: _answer_unknown(other),
        "turn/cancel": canceller.probe,
    })  # fmt: skip
    loop = asyncio.get_running_loop()
    commands = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
    print("ready", flush=True)
    for step in (probing.start, probing.streaming):
        await commands.readline()
        await step()
    await commands.readline()
    timed = await probing.finish()
    await canceller.settle()
    print(json.dumps(timed), flush=True)


def socket_rows(
    high: int,
    result: tuple[float, dict[str, Latencies], int, float],
    probe_rows: Callable[[int, dict[str, Latencies], str], list[Row]],
) -> list[Row]:
    _cpu, timed, normal, wall = result
    where = " (another socket connection)"
    rows = probe_rows(high, {"turn/list": timed["turn/list"]}, where)
    rows += probe_rows(high, {"initialize": timed["initialize"]}, " (a new socket connection)")
    pending = {"inquiry/answer": timed["inquiry/answer"]}
    rows += probe_rows(high, pending, " of a pending question (another socket connection)")
    unknown = {"inquiry/answer": timed["inquiry/answer unknown"]}
    rows += probe_rows(high, unknown, " of an unknown id (another socket connection)")
    cancel = {"turn/cancel": timed["turn/cancel"]}
    rows += probe_rows(high, cancel, " of a running turn (another socket connection)")
    rows.append(
        Row(f"the {high:,}-turn batch on the socket", f"{normal}/{high} turns ended normally,"
            f" {wall:.1f} s", "-", None, "all")
    )  # fmt: skip
    return rows


if __name__ == "__main__":
    if sys.argv[1:2] != ["--probes"] or len(sys.argv) != 3:
        raise SystemExit("usage: python -m bench.turns_socket --probes SOCKET")
    asyncio.run(_probe_process(Path(sys.argv[2])))
