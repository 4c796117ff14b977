"""A model that counts exactly (the embedded one, through its worker) is asked only
when a request's cheap upper bound comes near the compaction threshold."""

from __future__ import annotations

from jpd.context.count import TokenCount
from jpd.llm import base as llm


class Counting:
    """A provider that counts exactly: 1 token a character; bound: 2 a character."""

    name = "counting"

    def __init__(self) -> None:
        self.counted = 0

    @property
    def context_window(self) -> int:
        return 1_000

    async def count_tokens(self, request: llm.ModelRequest) -> int:
        self.counted += 1
        return sum(len(m.content) for m in request.messages)

    def token_bound(self, request: llm.ModelRequest) -> int:
        return 2 * sum(len(m.content) for m in request.messages)

    def stream(self, request: llm.ModelRequest) -> llm.EventStream:
        raise NotImplementedError


def _request(text: str) -> llm.ModelRequest:
    return llm.ModelRequest(model="m", messages=(llm.UserMessage(content=text),))


async def test_far_under_the_limit_the_bound_is_enough() -> None:
    provider = Counting()
    count = TokenCount("counting/m", provider)  # type: ignore[arg-type]
    assert count.exact
    assert await count.count(_request("x" * 100), below=500) == 200
    assert provider.counted == 0


async def test_near_the_limit_the_model_counts() -> None:
    provider = Counting()
    count = TokenCount("counting/m", provider)  # type: ignore[arg-type]
    assert await count.count(_request("x" * 300), below=500) == 300
    assert await count.count(_request("x" * 100)) == 100  # no limit: always exact
    assert provider.counted == 2
