"""A fast stream must not starve the daemon's other tasks (e.g. the writer to clients)."""

from __future__ import annotations

import time

import anyio
import anyio.lowlevel
import pytest

from jpd.llm.anthropic import AnthropicProvider
from jpd.llm.base import Provider, TextDelta
from jpd.llm.openai import OpenAIProvider
from tests.fixtures.fake_llm_server import FakeLLMServer, Reply, Send
from tests.fixtures.llm_support import ask
from tests.fixtures.llm_wire import a_text_answer, o_text_answer

PARTS = [f"w{i} " for i in range(20)]


async def ticks_during_stream(provider: Provider) -> tuple[list[int], str]:
    """Stream while another task ticks; returns the tick count seen at each text delta
    and the whole text.

    The consumer blocks 2 ms per delta (like a daemon busy publishing it).
    """
    ticks = 0
    seen: list[int] = []
    text: list[str] = []

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.lowlevel.checkpoint()
        async with provider.stream(ask()) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    seen.append(ticks)
                    text.append(event.text)
                    time.sleep(0.002)  # noqa: ASYNC251 - a consumer busy with the delta
        tg.cancel_scope.cancel()
    return seen, "".join(text)


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
async def test_a_burst_is_merged_and_its_first_text_is_not_held_back(
    server: FakeLLMServer, fmt: str
) -> None:
    """protocol.md 7.2: deltas read together are handed on merged (a burst costs the
    layers above once, not once per token), but the first text goes out alone and
    other tasks (the writer to clients) run before the rest of the burst is parsed."""
    # The whole answer is written at once, so the provider reads it in one or two
    # socket reads that never suspend.
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
        seen, text = await ticks_during_stream(provider)
    finally:
        await provider.aclose()
    assert text == "".join(PARTS)
    assert 2 <= len(seen) < len(PARTS)
    # The ticker advanced between the first delta and the next one.
    assert seen[1] > seen[0]
