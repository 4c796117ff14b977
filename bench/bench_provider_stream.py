"""Provider overhead on a streamed answer: time to first text and total time.

A fake server (its own process, so it does not share our GIL) streams a
2,000-token answer in the real wire format, one SSE event per token, after a
fixed first-token delay. Each run reads it twice over a warm keep-alive
connection: directly with httpx (bytes only, the floor) and through the jpd
provider (SSE decoding, JSON parsing, typed events). Medians and the ratios
provider/direct are printed for Anthropic and OpenAI wire formats.

Run from the repository root:

    python -m bench.bench_provider_stream [--runs 20] [--tokens 2000] [--delay-ms 50]
        [--interval-ms 0] [--format anthropic|openai|both]

(`--serve FORMAT` is the internal server mode.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from jpd.llm.anthropic import AnthropicProvider  # noqa: E402
from jpd.llm.base import Finish, Provider, TextDelta  # noqa: E402
from jpd.llm.openai import OpenAIProvider  # noqa: E402
from tests.fixtures.fake_llm_server import (  # noqa: E402
    Action,
    FakeLLMServer,
    Pause,
    Reply,
    Send,
)
from tests.fixtures.llm_support import ask  # noqa: E402
from tests.fixtures.llm_wire import (  # noqa: E402
    a_block_start,
    a_block_stop,
    a_message_delta,
    a_message_start,
    a_message_stop,
    a_text,
    o_chunk,
    o_done,
    o_usage,
)


def answer(fmt: str, tokens: int, delay: float, interval: float = 0.0) -> Reply:
    """The streamed answer: `tokens` text events after `delay` seconds, `interval` apart."""
    words = [f" tok{i}" for i in range(tokens)]
    if fmt == "anthropic":
        frames = [a_message_start(), a_block_start(0, {"type": "text", "text": ""})]
        frames += [a_text(0, word) for word in words]
        frames += [a_block_stop(0), a_message_delta("end_turn", tokens), a_message_stop()]
    else:
        frames = [o_chunk({"role": "assistant", "content": word}) for word in words[:1]]
        frames += [o_chunk({"content": word}) for word in words[1:]]
        frames += [o_chunk({}, finish_reason="stop")]
        frames += [o_chunk(usage=o_usage(10, tokens), choices=False), o_done()]
    body: list[Action] = [Pause(delay)]
    for frame in frames:
        body.append(Send(frame))
        if interval:
            body.append(Pause(interval))
    return Reply(headers={"content-type": "text/event-stream"}, body=tuple(body))


def serve(fmt: str, tokens: int, delay: float, interval: float) -> None:
    """Server mode: print the port, serve the answer forever, stop on stdin EOF."""
    with FakeLLMServer(default=answer(fmt, tokens, delay, interval)) as server:
        print(server.port, flush=True)
        sys.stdin.read()


Timing = tuple[float, float]  # (time to first text, total), seconds


async def direct(client: httpx.AsyncClient, url: str, body: bytes, marker: bytes) -> Timing:
    """Read the stream with bare httpx; first text = first chunk holding `marker`."""
    start = time.perf_counter()
    first = 0.0
    async with client.stream("POST", url, content=body) as response:
        async for chunk in response.aiter_raw():
            if not first and marker in chunk:
                first = time.perf_counter() - start
    return first, time.perf_counter() - start


async def through(provider: Provider, tokens: int) -> Timing:
    """Read the same stream through the provider's typed events."""
    start = time.perf_counter()
    first = 0.0
    pieces: list[str] = []
    async with provider.stream(ask("bench")) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                pieces.append(event.text)
                if not first:
                    first = time.perf_counter() - start
            elif isinstance(event, Finish):
                break
    # Deltas read together come merged (protocol.md 7.2): check the text itself.
    expected = "".join(f" tok{i}" for i in range(tokens))
    assert "".join(pieces) == expected, f"{tokens} tokens expected, got {len(pieces)} deltas"
    return first, time.perf_counter() - start


async def measure(fmt: str, base: str, runs: int, tokens: int) -> dict[str, list[Timing]]:
    """Time `runs` interleaved reads, direct and through the provider."""
    env = {"ANTHROPIC_API_KEY": "bench", "OPENAI_API_KEY": "bench"}
    provider: Provider
    if fmt == "anthropic":
        provider = AnthropicProvider(base_url=base, env=env)
        url, marker = f"{base}/v1/messages", b"text_delta"
    else:
        provider = OpenAIProvider(base_url=base, env=env)
        url, marker = f"{base}/chat/completions", b'"content"'
    body = json.dumps({"model": "m", "stream": True}).encode()
    async with httpx.AsyncClient(timeout=60) as client:
        runners: dict[str, Callable[[], Awaitable[Timing]]] = {
            "direct": lambda: direct(client, url, body, marker),
            "provider": lambda: through(provider, tokens),
        }
        results: dict[str, list[Timing]] = {name: [] for name in runners}
        for run in runners.values():
            await run()  # warm up the connection
        for _ in range(runs):
            # Interleave so drift (thermal, other load) hits both alike.
            for name, run in runners.items():
                results[name].append(await run())
    await provider.aclose()
    return results


def bench(fmt: str, runs: int, tokens: int, delay: float, interval: float) -> None:
    """Start the server process, measure, print the table and ratios."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.bench_provider_stream", "--serve", fmt,
         "--tokens", str(tokens), "--delay-ms", str(delay * 1000),
         "--interval-ms", str(interval * 1000)],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        base = f"http://127.0.0.1:{proc.stdout.readline().strip()}"
        results = asyncio.run(measure(fmt, base, runs, tokens))
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(10)

    ttft = {n: statistics.median(t[0] for t in r) * 1000 for n, r in results.items()}
    total = {n: statistics.median(t[1] for t in r) * 1000 for n, r in results.items()}
    per_token = (total["provider"] - total["direct"]) / tokens * 1e3
    print(
        f"{fmt}: {tokens} tokens, first-token delay {delay * 1000:.0f} ms,"
        f" {interval * 1000:g} ms between tokens, {runs} runs (median)"
    )
    print(f"  {'':10}{'first text':>12}{'total':>12}")
    for name in results:
        print(f"  {name:10}{ttft[name]:>9.2f} ms{total[name]:>9.2f} ms")
    print(
        f"  ratio     {ttft['provider'] / ttft['direct']:>11.3f}x"
        f"{total['provider'] / total['direct']:>11.3f}x"
        f"   ({ttft['provider'] - ttft['direct']:+.2f} ms first text,"
        f" {total['provider'] - total['direct']:+.2f} ms total, {per_token:+.1f} µs/token)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument(
        "--interval-ms", type=float, default=0.0, help="pause between tokens (0: flat out)"
    )
    parser.add_argument("--format", choices=["anthropic", "openai", "both"], default="both")
    parser.add_argument("--serve", choices=["anthropic", "openai"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    delay, interval = args.delay_ms / 1000, args.interval_ms / 1000
    if args.serve:
        serve(args.serve, args.tokens, delay, interval)
        return
    formats = ["anthropic", "openai"] if args.format == "both" else [args.format]
    for fmt in formats:
        bench(fmt, args.runs, args.tokens, delay, interval)


if __name__ == "__main__":
    main()
