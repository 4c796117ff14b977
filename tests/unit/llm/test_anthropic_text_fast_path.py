"""The Anthropic parser's text-delta shortcut reads what a JSON parser reads
(jpd/llm/anthropic.py `text_delta`).

A `content_block_delta` carrying a `text_delta` is recognized by a regular expression and
its text taken without parsing the JSON. On any data, whenever the shortcut answers, the
answer must be the text `json.loads` finds in the same data; the events the parser makes
must be those it makes with the shortcut off; and the shapes servers send (compact, or
`json.dumps`' default spacing, any text without escapes) must take it.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jpd.llm import anthropic
from jpd.llm.anthropic import _StreamState, text_delta
from jpd.llm.retry import RetryableError
from jpd.llm.stream_reader import Batch

PROFILE = settings(
    max_examples=400,
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.too_slow],
)

SEPARATORS = st.sampled_from([(",", ":"), (", ", ": ")])
"""What servers send: compact, or `json.dumps`' default."""
ODD_SEPARATORS = st.sampled_from([(" ,", " : "), (",\t", ":\t"), (",  ", ":  "), (", ", ":")])


def a_text_delta(text: str, index: int = 0) -> dict[str, Any]:
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "text_delta", "text": text},
    }


def parsed_text(data: str) -> str | None:
    """What the JSON parser finds: the text of a text delta, else None."""
    try:
        event = json.loads(data)
    except ValueError:
        return None
    if type(event) is not dict or event.get("type") != "content_block_delta":
        return None
    delta = event.get("delta")
    if type(delta) is not dict or delta.get("type") != "text_delta":
        return None
    text = delta.get("text")
    return text if type(text) is str else None


def events_of(data: str, *, shortcut: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    """What the parser makes of `data` (its events, or the error it raises)."""
    with monkeypatch.context() as patch:
        if not shortcut:
            patch.setattr(anthropic, "_TEXT_DELTA", re.compile(r"(?!)"))  # matches nothing
        state, out = _StreamState(secrets=()), Batch()
        try:
            done = state.feed(data, out)
        except (RetryableError, TypeError) as exc:  # TypeError: a lone surrogate
            return ("error", type(exc), str(exc))
        return (done, out.take(), state.blocks)


@PROFILE
@given(
    st.text(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.one_of(SEPARATORS, ODD_SEPARATORS),
    st.booleans(),
)
def test_the_shortcut_reads_what_json_reads(
    text: str, index: int, separators: tuple[str, str], ascii_only: bool
) -> None:
    data = json.dumps(a_text_delta(text, index), separators=separators, ensure_ascii=ascii_only)
    found = text_delta(data)
    assert found is None or found == parsed_text(data) == text


@PROFILE
@given(st.text().filter(lambda t: not any(c in t for c in '"\\') and t.isprintable()), SEPARATORS)
def test_what_servers_send_takes_the_shortcut(text: str, separators: tuple[str, str]) -> None:
    data = json.dumps(a_text_delta(text), separators=separators, ensure_ascii=False)
    assert text_delta(data) == text


PIECES = st.sampled_from(
    [
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"',
        '{"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "',
        '"}}', '"} }', '"}}}', '"}', "}", "{", '"', "\\", '\\"', "\\n", "\\u00e9", "\\ud800",
        "\x00", "\x1f", "\t", " ", "\n", "é", "\ud800", "01", "-0", "1e2", ",", ":",
        '"text":"', '"index":', '"type":"text_delta"', '"type":"thinking_delta"',
        '"thinking":"', "tok", "null", "[]",
    ]
)  # fmt: skip


@PROFILE
@given(st.lists(st.one_of(PIECES, st.text(max_size=3)), max_size=12))
def test_on_any_data_the_shortcut_agrees_with_json(pieces: list[str]) -> None:
    data = "".join(pieces)
    found = text_delta(data)
    if found is not None:
        assert found == parsed_text(data)


@PROFILE
@given(
    st.one_of(
        st.lists(st.one_of(PIECES, st.text(max_size=3)), max_size=12).map("".join),
        st.builds(
            lambda text, seps: json.dumps(a_text_delta(text), separators=seps),
            st.text(),
            st.one_of(SEPARATORS, ODD_SEPARATORS),
        ),
    )
)
def test_the_parser_makes_the_same_events_either_way(data: str) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        fast = events_of(data, shortcut=True, monkeypatch=monkeypatch)
        slow = events_of(data, shortcut=False, monkeypatch=monkeypatch)
    assert fast == slow


def test_other_events_and_escaped_text_go_through_the_json_parser() -> None:
    escaped = json.dumps(a_text_delta('say "hi"\n'))
    reordered = json.dumps(
        {"delta": {"type": "text_delta", "text": "x"}, "type": "content_block_delta", "index": 0}
    )
    thinking = json.dumps(
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "x"},
        }
    )
    for data in (escaped, reordered, thinking, '{"type":"ping"}'):
        assert text_delta(data) is None
    out = Batch()
    _StreamState(secrets=()).feed(escaped, out)
    assert [event.text for event in out.take()] == ['say "hi"\n']  # type: ignore[attr-defined]
