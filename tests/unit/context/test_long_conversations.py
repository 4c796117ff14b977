"""Conversations that outgrow the window keep working (protocol.md 12.5): a model that
refuses any request over its window, 40 turns of large tool outputs."""

from __future__ import annotations

from jpd.conversation import events as ev
from jpd.llm.history import MessageHistory
from tests.unit.context.fakes import BigTools, Conversation, WindowModel, config


async def test_forty_turns_with_large_tool_outputs_all_succeed() -> None:
    conv = Conversation(config(window=20_000), WindowModel(window=20_000), BigTools(6_000))
    for n in range(40):
        turn = await conv.turn(f"question {n}: read the next file")
        assert turn.stop_reason == "end_turn", conv.errors()
    assert conv.model.refused == 0  # counted before sending: never refused
    methods = {c.method for c in conv.compactions()}
    assert methods == {"stub", "summary"}
    assert max(conv.model.sizes) <= 20_000
    # Stubbing comes in batches: far fewer compactions than turns.
    assert len(conv.compactions()) < 20
    # The log keeps every original event: all 40 questions and tool outputs.
    requests = [e for e in conv.log.events if isinstance(e, ev.ChatRequest)]
    outputs = [e for e in conv.log.events if isinstance(e, ev.ToolCallResponse)]
    assert len(requests) == 40 and all(len(o.content) == 6_000 for o in outputs)
    # Attached clients are told of each compaction as it happens.
    told = [e for e in conv.hub.published if e.kind == "context_compacted"]
    assert [(e.method, e.tokens_after) for e in told] == [  # type: ignore[union-attr]
        (c.method, c.tokens_after) for c in conv.compactions()
    ]


async def test_parallel_batches_are_never_split() -> None:
    model = WindowModel(window=20_000, parallel=3)
    conv = Conversation(config(window=20_000), model, BigTools(2_500))
    for n in range(30):
        turn = await conv.turn(f"question {n}")
        assert turn.stop_reason == "end_turn", conv.errors()
    # Every request passed the fake's pairing check (a split batch fails it).
    assert model.refused == 0 and {c.method for c in conv.compactions()} >= {"summary"}


async def test_replaying_the_log_sends_the_same_prompt() -> None:
    conv = Conversation(config(window=20_000), WindowModel(window=20_000), BigTools(6_000))
    for n in range(15):
        await conv.turn(f"question {n}")
    assert conv.compactions()
    # A restart rebuilds the view from the log alone: byte for byte what the turn had.
    assert MessageHistory(conv.log.events).messages() == conv.history.messages()


async def test_usage_events_show_how_full_the_context_is() -> None:
    conv = Conversation(config(window=20_000), WindowModel(window=20_000), BigTools(100))
    await conv.turn("hi")
    usages = [e for e in conv.hub.published if e.kind == "usage"]
    assert usages and all(u.context is not None for u in usages)  # type: ignore[union-attr]
    assert usages[-1].context.window == 20_000  # type: ignore[union-attr]
    assert usages[-1].context.used == conv.model.sizes[-1] + 5  # type: ignore[union-attr]
