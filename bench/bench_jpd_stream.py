"""Daemon overhead on a streamed hosted answer: jpd and `jp query` against bare httpx.

A fake Anthropic server (its own process, started through
`bench.bench_provider_stream --serve`) streams a 2,000-token answer, one SSE
event per token, after a fixed first-token delay. Each round reads it, in turn:

- `httpx`: directly, in this process, over a warm keep-alive connection (the floor);
- `jpd`: through a real `python -m jpd` subprocess on stdio, started once: this
  process sends `turn/start` (a new conversation each time) and reads `turn/event`
  notifications until `turn_completed`; first text = the first `text_delta`;
- `jp query` (unless `--no-jp`): a fresh `python -m jpcli query --new`
  process per round; first text = its first stdout byte, total = its exit. It
  talks to the shared daemon on its socket (`JP_SOCKET` in a temporary
  directory; `jp` starts it in the warm-up round, the bench stops it);
- `jp --stdio query` (unless `--no-jp`): the same with a private daemon that
  `jp` starts on its stdio for each query (so a daemon start-up every round).

Medians over the rounds, the ratios to httpx and the absolute extra milliseconds
are printed. `jp query` pays for a Python start-up on every run; the row
`python start-up` (a process printing one line) times that alone for reference.
With `PYTHONDONTWRITEBYTECODE` set, every `jp` and `jpd` start also compiles the
project's sources again, which the `jp --stdio` row (a daemon start per query) shows.
`--interval-ms 1` approximates a fast real stream; 0 measures the daemon's throughput.

Run from the repository root:

    python -m bench.bench_jpd_stream [--runs 10] [--tokens 2000] [--delay-ms 200]
        [--interval-ms 0] [--no-jp]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_provider_stream import Timing, direct  # noqa: E402

MODEL = "anthropic/claude-bench"
KEY = "sk-ant-bench-not-a-real-key"


class StdioClient:
    """A minimal JSON-RPC client of `jpd` on its stdio (Content-Length framing)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self._in = process.stdout
        self._out = process.stdin
        self._next_id = 0

    @classmethod
    async def start(cls, env: dict[str, str], stderr: Any) -> StdioClient:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "jpd",
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env, cwd=ROOT,
        )  # fmt: skip
        client = cls(process)
        init = {"protocolVersion": 1, "clientInfo": {"name": "bench", "version": "1"}}
        await client.request("initialize", init)
        await client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        return client

    async def send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        self._out.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        await self._out.drain()

    async def receive(self) -> dict[str, Any]:
        header = await self._in.readuntil(b"\r\n\r\n")
        length = 0
        for line in header.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        message: dict[str, Any] = json.loads(await self._in.readexactly(length))
        return message

    async def request(self, method: str, params: Any = None) -> Any:
        """Send a request and return its result, dropping notifications read meanwhile."""
        self._next_id += 1
        await self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        while True:
            message = await self.receive()
            if message.get("id") == self._next_id and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result")

    async def turn(self, tokens: int) -> Timing:
        """One turn on a new conversation: (time to first text_delta, time to turn_completed)."""
        start = time.perf_counter()
        self._next_id += 1
        params = {"message": "bench"}
        request = {"jsonrpc": "2.0", "id": self._next_id, "method": "turn/start", "params": params}
        await self.send(request)
        first = 0.0
        pieces: list[str] = []
        while True:
            message = await self.receive()
            if "error" in message:
                raise RuntimeError(f"turn/start: {message['error']}")
            if message.get("method") != "turn/event":
                continue
            event = message["params"]["event"]
            if event["kind"] == "text_delta":
                pieces.append(event["text"])
                if not first:
                    first = time.perf_counter() - start
            elif event["kind"] == "turn_completed":
                total = time.perf_counter() - start
                if event["stopReason"] != "end_turn":
                    raise RuntimeError(f"turn ended with {event}")
                break
        # Deltas arriving within a tick are merged (protocol.md 7.2): check the text.
        expected = "".join(f" tok{i}" for i in range(tokens))
        assert "".join(pieces) == expected, f"{tokens} tokens expected, got {len(pieces)} deltas"
        return first, total

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.request("shutdown"), 10)
            await self.send({"jsonrpc": "2.0", "method": "exit"})
            self._out.close()
        try:
            await asyncio.wait_for(self.process.wait(), 10)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()


async def first_byte_and_exit(command: list[str], env: dict[str, str]) -> Timing:
    """Run `command`; (time to its first stdout byte, time to its exit)."""
    start = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT
    )
    assert process.stdout is not None and process.stderr is not None
    first = 0.0
    while await process.stdout.read(65536):
        if not first:
            first = time.perf_counter() - start
    errors = await process.stderr.read()
    code = await process.wait()
    total = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"{shlex.join(command)} exited {code}: {errors.decode()[-500:]}")
    return first, total


def start_server(tokens: int, delay: float, interval: float) -> tuple[subprocess.Popen[str], str]:
    """The fake Anthropic server process and its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.bench_provider_stream", "--serve", "anthropic",
         "--tokens", str(tokens), "--delay-ms", str(delay * 1000),
         "--interval-ms", str(interval * 1000)],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    return proc, f"http://127.0.0.1:{proc.stdout.readline().strip()}"


def environment(home: Path, base_url: str) -> dict[str, str]:
    """The daemon's and `jp`'s environment: isolated config, data, logs and socket."""
    config = home / "config.toml"
    config.write_text(f'[assistant.model]\nid = "{MODEL}"\n[daemon]\nidle_timeout = 60\n')
    env = {
        **os.environ,
        "JP_CONFIG": str(config),
        "JP_DATA_DIR": str(home / "data"),
        "JP_LOG_DIR": str(home / "logs"),
        "JP_STATE_DIR": str(home / "state"),
        "JP_SOCKET": str(home / "jpd.sock"),
        "XDG_RUNTIME_DIR": str(home),
        "ANTHROPIC_API_KEY": KEY,
        "ANTHROPIC_BASE_URL": base_url,
    }
    env.pop("JPD_COMMAND", None)
    env.pop("JPD_LOG_LEVEL", None)
    return env


def stop_shared_daemon(home: Path) -> None:
    """Stop the socket daemon `jp` started for the bench, and wait until it is gone."""
    pid_file = home / "jpd.pid"  # beside JP_SOCKET, as `jpd --listen` names it
    try:
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, signal.SIGTERM)
    except (ValueError, OSError, IndexError):
        return  # never started (`--no-jp`) or already gone
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    print(f"warning: jpd (pid {pid}) did not stop within 20 s", file=sys.stderr)


async def measure(
    base_url: str, env: dict[str, str], home: Path, args: argparse.Namespace
) -> dict[str, list[Timing]]:
    """Run the rounds, interleaving every path so drift hits all of them alike."""
    tokens = args.tokens
    url = f"{base_url}/v1/messages"
    body = json.dumps({"model": "claude-bench", "stream": True}).encode()
    (home / "logs").mkdir(exist_ok=True)
    stderr = (home / "logs" / "stdio-jpd.log").open("wb")
    jp = [sys.executable, "-m", "jpcli"]
    query = ["query", "--new", "bench"]
    async with httpx.AsyncClient(timeout=60) as client:
        daemon = await StdioClient.start(env, stderr)
        try:
            runners: dict[str, Callable[[], Awaitable[Timing]]] = {
                "httpx": lambda: direct(client, url, body, b"text_delta"),
                "jpd": lambda: daemon.turn(tokens),
            }
            if not args.no_jp:
                runners["jp query"] = lambda: first_byte_and_exit([*jp, *query], env)
                runners["jp --stdio query"] = lambda: first_byte_and_exit(
                    [*jp, "--stdio", *query], env
                )
                runners["python start-up"] = lambda: first_byte_and_exit(
                    [sys.executable, "-c", "print(flush=True)"], env
                )
            for run in runners.values():
                await run()  # warm up: connections, imports, a shared daemon
            results: dict[str, list[Timing]] = {name: [] for name in runners}
            for _ in range(args.runs):
                for name, run in runners.items():
                    results[name].append(await run())
        finally:
            await daemon.close()
            stderr.close()
    return results


def report(results: dict[str, list[Timing]], args: argparse.Namespace) -> None:
    first = {n: statistics.median(t[0] for t in r) * 1000 for n, r in results.items()}
    total = {n: statistics.median(t[1] for t in r) * 1000 for n, r in results.items()}
    print(
        f"anthropic wire format: {args.tokens} tokens, first-token delay {args.delay_ms:g} ms,"
        f" {args.interval_ms:g} ms between tokens, {args.runs} rounds (medians)"
    )
    print(f"  {'':18}{'first text':>12}{'total':>12}{'ratio first':>13}{'ratio total':>13}"
          f"{'extra first':>13}{'extra total':>13}")  # fmt: skip
    base_first, base_total = first["httpx"], total["httpx"]
    for name in results:
        print(
            f"  {name:18}{first[name]:>9.2f} ms{total[name]:>9.2f} ms"
            f"{first[name] / base_first:>12.3f}x{total[name] / base_total:>12.3f}x"
            f"{first[name] - base_first:>+10.2f} ms{total[name] - base_total:>+10.2f} ms"
        )
    extra = (total["jpd"] - base_total) / args.tokens * 1e3
    print(f"  jpd per token: {extra:+.1f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--delay-ms", type=float, default=200.0)
    parser.add_argument("--interval-ms", type=float, default=0.0)
    parser.add_argument("--no-jp", action="store_true", help="skip the `jp query` rows")
    args = parser.parse_args()
    server, base_url = start_server(args.tokens, args.delay_ms / 1000, args.interval_ms / 1000)
    try:
        with tempfile.TemporaryDirectory(prefix="jpd-bench-") as tmp:
            home = Path(tmp)
            env = environment(home, base_url)
            try:
                results = asyncio.run(measure(base_url, env, home, args))
            finally:
                stop_shared_daemon(home)
            report(results, args)
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(10)


if __name__ == "__main__":
    main()
