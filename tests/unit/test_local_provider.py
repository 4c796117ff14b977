"""The embedded `local` provider with the real SmolLM2-135M model."""

from __future__ import annotations

import contextlib
import random
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import pytest_asyncio

from jpd.llm.base import (
    AssistantMessage,
    Finish,
    ModelRequest,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    ToolChoiceAny,
    ToolChoiceTool,
    ToolDefinition,
    UsageEvent,
    UserMessage,
)
from jpd.llm.errors import ProviderError, ProviderUnavailable
from jpd.llm.local import LocalProvider

# One event loop for the module, so the module-scoped provider (and its loaded model)
# is shared by every test.
pytestmark = pytest.mark.asyncio(loop_scope="module")

WEATHER = ToolDefinition(
    name="get_weather",
    description="Get the current weather for a city.",
    parameters={
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city", "unit"],
    },
)
TIME = ToolDefinition(
    name="get_time",
    description="Get the current time in a timezone.",
    parameters={
        "type": "object",
        "properties": {"timezone": {"type": "string"}},
        "required": ["timezone"],
    },
)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def provider() -> AsyncIterator[LocalProvider]:
    local = LocalProvider()
    await local.load()
    yield local
    await local.aclose()


def _ask(text: str, **kwargs: Any) -> ModelRequest:
    kwargs.setdefault("model", "smollm2")
    return ModelRequest(messages=(UserMessage(content=text),), **kwargs)


async def _collect(provider: LocalProvider, request: ModelRequest) -> list[StreamEvent]:
    async with provider.stream(request) as events:
        return [event async for event in events]


def _text(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


# --- unavailable ------------------------------------------------------------------


async def test_missing_model_path_says_how_to_fix(tmp_path: Path) -> None:
    local = LocalProvider(model_path=tmp_path / "missing.gguf")
    with pytest.raises(ProviderUnavailable) as info:
        await _collect(local, _ask("hi"))
    assert "missing.gguf" in info.value.message
    assert "assistant.model.id" in info.value.message
    assert "\n" not in info.value.message


async def test_missing_llama_cpp_says_how_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    with pytest.raises(ProviderUnavailable) as info:
        await _collect(LocalProvider(), _ask("hi"))
    assert "pip install 'jpd[local]'" in info.value.message
    assert "assistant.model.id" in info.value.message


async def test_unloadable_file_is_unavailable(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a model")
    with pytest.raises(ProviderUnavailable, match="could not load local model"):
        await _collect(LocalProvider(), _ask("hi", model=str(bogus)))


# --- generation ------------------------------------------------------------------------


async def test_streams_text_then_usage_then_finish(provider: LocalProvider) -> None:
    events = await _collect(provider, _ask("What is the capital of France?", max_tokens=24))
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert deltas, events
    assert _text(events).strip()
    usage, finish = events[-2:]
    assert isinstance(usage, UsageEvent)
    assert usage.usage.input_tokens and usage.usage.input_tokens > 5
    assert usage.usage.output_tokens is not None
    assert 0 < usage.usage.output_tokens <= 24
    assert isinstance(finish, Finish)
    assert finish.reason in ("end_turn", "max_tokens")
    assert sum(isinstance(e, Finish) for e in events) == 1


async def test_token_limit_finishes_with_max_tokens(provider: LocalProvider) -> None:
    events = await _collect(provider, _ask("Write a long story about a dragon.", max_tokens=3))
    assert events[-1] == Finish(reason="max_tokens")
    usage = events[-2]
    assert isinstance(usage, UsageEvent)
    assert usage.usage.output_tokens == 3


async def test_same_seed_same_answer(provider: LocalProvider) -> None:
    request = _ask("Name a fruit.", max_tokens=12, temperature=0.8)
    first = _text(await _collect(provider, request))
    second = _text(await _collect(provider, request))
    assert first == second


async def test_forced_tool_call_matches_schema(provider: LocalProvider) -> None:
    request = _ask(
        "What's the weather like in Paris, in celsius?",
        tools=(WEATHER, TIME),
        tool_choice=ToolChoiceTool(name="get_weather"),
    )
    events = await _collect(provider, request)
    assert [type(e) for e in events] == [UsageEvent, ToolCallEvent, Finish]
    call = events[1]
    assert isinstance(call, ToolCallEvent)
    assert call.name == "get_weather"
    assert call.id.startswith("call_")
    assert set(call.arguments) == {"city", "unit"}
    assert isinstance(call.arguments["city"], str)
    assert call.arguments["unit"] in ("celsius", "fahrenheit")
    assert events[2] == Finish(reason="tool_use")


async def test_any_tool_picks_one_of_the_tools(provider: LocalProvider) -> None:
    request = _ask("What time is it in Tokyo?", tools=(WEATHER, TIME), tool_choice=ToolChoiceAny())
    events = await _collect(provider, request)
    call = next(e for e in events if isinstance(e, ToolCallEvent))
    schema = {t.name: t.parameters for t in (WEATHER, TIME)}[call.name]
    assert set(call.arguments) == set(schema["required"])
    assert events[-1] == Finish(reason="tool_use")


async def test_too_long_conversation_is_an_error(provider: LocalProvider) -> None:
    with pytest.raises(ProviderError, match="does not fit"):
        await _collect(provider, _ask("word " * 5000))


async def test_cancel_mid_stream_leaves_model_usable(provider: LocalProvider) -> None:
    received: list[StreamEvent] = []

    async def consume() -> None:
        async with provider.stream(_ask("Tell me about the sea.", max_tokens=200)) as events:
            async for event in events:
                received.append(event)
                if isinstance(event, TextDelta):
                    scope.cancel()

    with anyio.CancelScope() as scope:
        await consume()
    assert scope.cancelled_caught
    assert not any(isinstance(e, Finish) for e in received)
    events = await _collect(provider, _ask("Say hello.", max_tokens=8))
    assert _text(events).strip()
    assert isinstance(events[-1], Finish)


class _Abandon(Exception):
    pass


@pytest.mark.parametrize("leave", ["break", "raise"])
async def test_abandoned_stream_releases_model(provider: LocalProvider, leave: str) -> None:
    with contextlib.suppress(_Abandon):
        async with provider.stream(_ask("Count to ten.", max_tokens=50)) as events:
            async for first in events:
                assert isinstance(first, TextDelta)
                if leave == "raise":
                    raise _Abandon
                break
    events = await _collect(provider, _ask("Say hi.", max_tokens=6))
    assert isinstance(events[-1], Finish)


async def test_long_prompt_is_evaluated_in_chunks(provider: LocalProvider) -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 40
    first = await _collect(provider, _ask(text + "What jumps?", max_tokens=4))
    usage = first[-2]
    assert isinstance(usage, UsageEvent)
    assert usage.usage.input_tokens and usage.usage.input_tokens > 300
    assert isinstance(first[-1], Finish)
    # A follow-up sharing the prefix reuses the evaluated context and still answers.
    second = await _collect(provider, _ask(text + "What is lazy?", max_tokens=4))
    assert isinstance(second[-1], Finish)


async def test_concurrent_requests_are_serialized(provider: LocalProvider) -> None:
    results: dict[int, list[StreamEvent]] = {}

    async def run(i: int) -> None:
        results[i] = await _collect(provider, _ask(f"Say the number {i}.", max_tokens=8))

    async with anyio.create_task_group() as tg:
        for i in range(3):
            tg.start_soon(run, i)
    assert all(isinstance(events[-1], Finish) for events in results.values())
    assert len(results) == 3


# --- the token bound ----------------------------------------------------------------


def _tricky_texts() -> list[str]:
    """Text a tokenizer may split finely: scripts, emoji, code, markup, special-token
    names, long runs of one character, and random mixes of them."""
    fixed = [
        "",
        " ",
        "\n\n\n",
        "日本語のテキストとかな漢字",
        "🙂🙃🤖👩‍👩‍👧‍👦" * 5,
        "def f(x):\n\treturn {'a': [1, 2, 3]}\n" * 3,
        "<|im_start|>user\nhi<|im_end|>",
        "a" * 500,
        "\u200b\u202e\ufeff" * 20,
        "Ωμέγα ЖЖЖ ḁ̷̧ z̸͈̐a̵̛͚l̶̺̅g̸̡̋o̵̬̊",
    ]
    rng = random.Random(7)
    alphabet = "".join(fixed) + "abc XYZ 012 .,;!? \t\n"
    mixes = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 300))) for _ in range(40)]
    return fixed + mixes


async def test_the_token_bound_is_never_below_the_count(provider: LocalProvider) -> None:
    """`token_bound` lets compaction skip the exact count: it must never undercount."""
    texts = _tricky_texts()
    for text, other in zip(texts, reversed(texts), strict=True):
        for request in (
            ModelRequest(
                model="smollm2",
                system=other,
                messages=(
                    UserMessage(content=text),
                    AssistantMessage(content=other),
                    UserMessage(content=text),
                ),
            ),
            _ask(text, tools=(WEATHER, TIME), tool_choice=ToolChoiceAny()),
        ):
            assert provider.token_bound(request) >= await provider.count_tokens(request), text
