"""Reading the window a provider states in its refusal, and NDJSON framing."""

from __future__ import annotations

import pytest

from jpd.llm.errors import ContextOverflow, ProviderError
from jpd.llm.ndjson import NDJSONDecoder
from jpd.llm.overflow import as_overflow, refused_size, stated_window


@pytest.mark.parametrize(
    ("message", "window", "requested"),
    [
        ("prompt is too long: 5608 tokens > 5607 maximum", 5607, 5608),
        (
            "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 9,000 tokens. Please reduce the length of the messages.",
            8192,
            9000,
        ),
        (
            "The input token count (1048580) exceeds the maximum number of tokens allowed "
            "(1048576).",
            1048576,
            1048580,
        ),
        ("the request exceeds the available context size, try increasing it", None, None),
        (
            'the request exceeds the available context size (n_prompt_tokens: 5000, "n_ctx": 4096)',
            4096,
            5000,
        ),
        ("the input length exceeds the context length", None, None),
        ("requested 3000 tokens, context window of 2048", 2048, 3000),
    ],
)
def test_the_stated_window(message: str, window: int | None, requested: int | None) -> None:
    assert stated_window(message) == window
    assert refused_size(message) == requested
    overflow = ContextOverflow(message)
    assert (overflow.window, overflow.requested) == (window, requested)


def test_wordings_the_http_mapping_lacks_become_overflows() -> None:
    assert as_overflow(ProviderError("google: ... exceeds the maximum number of tokens allowed"))
    assert as_overflow(ProviderError("ollama: the input length exceeds the context length"))
    assert as_overflow(ProviderError("anthropic: authentication failed (401)")) is None


def test_ndjson_lines_split_anywhere() -> None:
    decoder = NDJSONDecoder()
    assert decoder.feed_data('{"a"') == []
    assert decoder.feed_data(': 1}\r\n\n{"b": 2}\n{"c"') == ['{"a": 1}', '{"b": 2}']
    assert decoder.close_data() == ['{"c"']
    assert decoder.close_data() == []
