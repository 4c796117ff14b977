"""Fixtures for provider tests: a real local HTTP server and providers pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from jpd.llm.anthropic import AnthropicProvider
from jpd.llm.openai import OpenAIProvider
from tests.fixtures.fake_llm_server import FakeLLMServer
from tests.fixtures.llm_support import ANTHROPIC_KEY, FAST_RETRIES, OPENAI_KEY


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
async def anthropic(server: FakeLLMServer) -> AsyncIterator[AnthropicProvider]:
    provider = AnthropicProvider(
        base_url=server.base_url,
        env={"ANTHROPIC_API_KEY": ANTHROPIC_KEY},
        timeout=5.0,
        retry_policy=FAST_RETRIES,
    )
    yield provider
    await provider.aclose()


@pytest.fixture
async def openai(server: FakeLLMServer) -> AsyncIterator[OpenAIProvider]:
    provider = OpenAIProvider(
        base_url=f"{server.base_url}/v1",
        env={"OPENAI_API_KEY": OPENAI_KEY},
        timeout=5.0,
        retry_policy=FAST_RETRIES,
    )
    yield provider
    await provider.aclose()
