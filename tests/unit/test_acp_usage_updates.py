"""The ACP translation of usage and compaction turn events (issue 29 item 4)."""

from __future__ import annotations

from acp.schema import AgentMessageChunk, UsageUpdate
from jpcli.acp.updates import LiveTranslator, history


def test_usage_with_a_window_becomes_a_usage_update_with_the_session_cost() -> None:
    translator = LiveTranslator(cost=0.5)
    usage = {"inputTokens": 900, "outputTokens": 100}
    [update] = translator.translate(
        {"kind": "usage", "usage": usage, "cost": 0.25, "context": {"used": 1000, "window": 8000}}
    )
    assert isinstance(update, UsageUpdate)
    assert (update.used, update.size, update.cost.amount) == (1000, 8000, 0.75)  # type: ignore[union-attr]
    assert translator.translate({"kind": "usage", "usage": usage}) == []  # no window known


def test_a_compaction_is_a_message_chunk_live_and_in_replay() -> None:
    live = LiveTranslator().translate(
        {"kind": "context_compacted", "method": "summary", "tokensBefore": 1800, "tokensAfter": 400}
    )
    replay = history(
        [{"type": "context_compacted", "method": "stub", "tokens_before": 9, "tokens_after": 3}],
        frozenset(),
    )
    assert isinstance(live[0], AgentMessageChunk) and isinstance(replay[0], AgentMessageChunk)
    assert "older part summarised, 1,800 -> 400 tokens" in live[0].content.text  # type: ignore[union-attr]
    assert "old tool outputs cleared, 9 -> 3 tokens" in replay[0].content.text  # type: ignore[union-attr]
