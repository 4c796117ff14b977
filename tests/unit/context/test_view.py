"""The model's view rebuilt from the log plus compactions (`jpd.llm.history`), the
overflow errors providers' answers become, and the windows (protocol.md 12.5)."""

from __future__ import annotations

import httpx

from jpd.context.plan import plan_cut
from jpd.context.window import answer_reserve, context_window
from jpd.conversation import events as ev
from jpd.llm import base as llm
from jpd.llm.errors import ContextOverflow
from jpd.llm.history import STUB_PREFIX, MessageHistory
from jpd.llm.transport import status_error as http_error
from tests.unit.context.fakes import config


def log() -> list[ev.Event]:
    return [
        ev.ChatRequest(content="first, use tabs"),  # 0
        ev.ToolCallRequest(id="a", name="read", arguments={"path": "x"}),  # 1
        ev.ToolCallRequest(id="b", name="read", arguments={"path": "y"}),  # 2
        ev.ToolCallResponse(id="a", content="A" * 500, is_error=False),  # 3
        ev.ToolCallResponse(id="b", content="B" * 500, is_error=False),  # 4
        ev.ChatResponse(message="done"),  # 5
        ev.ChatRequest(content="second"),  # 6
        ev.ChatResponse(message="ok"),  # 7
    ]


def compacted(method: str, end: int, summary: str | None = None) -> ev.ContextCompacted:
    return ev.ContextCompacted(
        trigger="auto",
        method=method,
        first_event=0,
        end_event=end,
        summary=summary,
        tokens_before=10,
        tokens_after=5,
    )


def test_stubs_replace_old_outputs_and_keep_the_pairing() -> None:
    messages = MessageHistory([*log(), compacted("stub", 4)]).messages()
    results = [m for m in messages if isinstance(m, llm.ToolResultMessage)]
    assert results[0].content.startswith(STUB_PREFIX) and "read" in results[0].content
    assert '"path": "x"' in results[0].content and "500 characters" in results[0].content
    assert results[1].content == "B" * 500  # at or after end_event: kept
    assert [r.tool_call_id for r in results] == ["a", "b"]


def test_a_summary_replaces_the_events_it_covers() -> None:
    messages = MessageHistory([*log(), compacted("summary", 6, "Goal: x")]).messages()
    assert isinstance(messages[0], llm.UserMessage) and "Goal: x" in messages[0].content
    assert [m.content for m in messages[1:]] == ["second", "ok"]


def test_the_latest_summary_wins_and_later_events_follow_it() -> None:
    events = [*log(), compacted("summary", 6, "one"), ev.ChatRequest(content="third")]
    events.append(compacted("summary", 9, "two"))
    messages = MessageHistory(events).messages()
    assert "two" in messages[0].content and "one" not in messages[0].content
    assert [m.content for m in messages[1:]] == ["third"]


def test_an_unknown_method_of_a_newer_daemon_keeps_everything() -> None:
    plain = MessageHistory(log()).messages()
    assert MessageHistory([*log(), compacted("future", 6)]).messages() == plain


def test_a_cut_never_starts_at_a_tool_result() -> None:
    entries = MessageHistory(log()).entries()
    for budget in range(0, 400, 10):
        cut = plan_cut(entries, budget)
        if cut is not None:
            assert not isinstance(entries[cut.index][1], llm.ToolResultMessage)
            assert cut.index > 0


def test_provider_overflow_answers_become_context_overflow() -> None:
    answers = [
        (
            400,
            b'{"type":"error","error":{"type":"invalid_request_error",'
            b'"message":"prompt is too long: 210000 tokens > 200000 maximum"}}',
        ),
        (
            400,
            b'{"error":{"message":"This model\'s maximum context length is 128000 tokens",'
            b'"type":"invalid_request_error","code":"context_length_exceeded"}}',
        ),
        (
            400,
            b'{"error":{"code":400,"message":"the request exceeds the available context '
            b'size, try increasing it","type":"exceed_context_size_error"}}',
        ),
    ]
    for status, body in answers:
        error = http_error("p", httpx.Response(status, content=body), key_env=None, secrets=())
        assert isinstance(error, ContextOverflow), body
    other = httpx.Response(400, content=b'{"error":{"message":"bad tool schema"}}')
    assert not isinstance(http_error("p", other, key_env=None, secrets=()), ContextOverflow)


def test_windows_and_reserves() -> None:
    assert context_window(config(window=12_345)) == 12_345
    cfg = config(window=None)
    assert context_window(cfg.with_model("anthropic/claude-sonnet-4-5")) == 200_000
    assert context_window(cfg.with_model("local/smollm2")) == 2048
    assert context_window(cfg.with_model("openai-compatible/qwen")) is None
    assert answer_reserve(None, 2048) == 256
    assert answer_reserve(None, 200_000) == 20_000
    assert answer_reserve(100_000, 2048) == 1024


def test_anthropic_gives_the_summary_its_own_cache_breakpoint() -> None:
    from jpd.llm.anthropic_request import build_body

    messages = MessageHistory([*log(), compacted("summary", 6, "Goal: x")]).messages()
    request = llm.ModelRequest(model="claude-x", system="s", messages=tuple(messages))
    body = build_body(request)
    marked = [
        block for turn in body["messages"] for block in turn["content"] if "cache_control" in block
    ]
    assert "Goal: x" in marked[0]["text"]
    assert len(marked) == 2  # the summary and the last turn: four with system and tools
