"""A fast stream must not starve the daemon's other tasks (e.g. the writer to clients)."""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncGenerator

import anyio
import anyio.lowlevel
import pytest

from jpd.llm.anthropic import AnthropicProvider
from jpd.llm.base import Provider, TextDelta
from jpd.llm.openai import OpenAIProvider
from jpd.llm.transport import fair
from tests.fixtures.fake_llm_server import FakeLLMServer, Reply, Send
from tests.fixtures.llm_support import ask
from tests.fixtures.llm_wire import a_text_answer, o_text_answer

PARTS = [f"w{i} " for i in range(20)]


async def ticks_during_stream(provider: Provider) -> list[int]:
    """Stream while another task ticks; returns the tick count seen at each text delta.

    The consumer blocks 2 ms per delta (like a daemon busy publishing it), so the
    stream takes far longer than the provider's yield interval.
    """
    ticks = 0
    seen: list[int] = []

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.lowlevel.checkpoint()
        async for event in provider.stream(ask()):
            if isinstance(event, TextDelta):
                seen.append(ticks)
                time.sleep(0.002)  # noqa: ASYNC251 - a consumer busy with the delta
        tg.cancel_scope.cancel()
    return seen


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
async def test_other_tasks_run_while_a_burst_is_parsed(server: FakeLLMServer, fmt: str) -> None:
    # The whole answer is written at once, so the provider reads it in one or two
    # socket reads that never suspend; only the provider's own yields let the
    # ticker run between deltas.
    frames = a_text_answer(*PARTS) if fmt == "anthropic" else o_text_answer(*PARTS)
    server.push(
        Reply(headers={"content-type": "text/event-stream"}, body=(Send(b"".join(frames)),))
    )
    provider: Provider
    if fmt == "anthropic":
        provider = AnthropicProvider(base_url=server.base_url, env={"ANTHROPIC_API_KEY": "k"})
    else:
        provider = OpenAIProvider(base_url=f"{server.base_url}/v1", env={"OPENAI_API_KEY": "k"})
    try:
        seen = await ticks_during_stream(provider)
    finally:
        await provider.aclose()
    assert len(seen) == len(PARTS)
    # The ticker advanced between (nearly) every pair of deltas, not only at the end.
    advanced = sum(1 for before, after in itertools.pairwise(seen) if after > before)
    assert advanced >= len(PARTS) - 2


async def test_fair_passes_items_through_unchanged_and_in_order() -> None:
    async def items() -> AsyncGenerator[int, None]:
        for i in range(5):
            yield i

    assert [i async for i in fair(items(), interval=0.0)] == [0, 1, 2, 3, 4]


async def test_closing_fair_closes_its_source() -> None:
    closed = False

    async def items() -> AsyncGenerator[int, None]:
        nonlocal closed
        try:
            for i in range(5):
                yield i
        finally:
            closed = True

    stream = fair(items())
    assert await anext(stream) == 0
    await stream.aclose()
    assert closed
