"""An overflow sized by the refusal (protocol.md 12.5): a model whose real window is
smaller than configured refuses once; the turn compacts against the window the refusal
states, retries once, and the conversation remembers that window for later turns."""

from __future__ import annotations

from jpd.conversation import events as ev
from jpd.protocol.turn_events import ContextCompactedEvent
from tests.unit.context.fakes import BigTools, Conversation, WindowModel, config

LONG = "w" * 15_000  # about 5,000 of the fake model's tokens


async def test_one_refusal_one_compaction_one_retry_then_the_window_is_remembered() -> None:
    model = WindowModel(window=20_000, calls_tool=False)
    conv = Conversation(config(window=200_000), model, BigTools(10))
    for _ in range(3):
        assert (await conv.turn(LONG)).stop_reason == "end_turn"
    assert model.refused == 0 and conv.compactions() == []

    sent = len(model.requests)
    turn = await conv.turn(LONG)

    assert turn.stop_reason == "end_turn"
    assert model.refused == 1
    [compaction] = conv.compactions()
    assert compaction.trigger == "overflow" and compaction.method == "summary"
    assert compaction.window == ev.LearnedWindow(model="test/window", tokens=20_000)
    # The refused request, the summary's, the retry: nothing more.
    assert len(model.requests) - sent == 3
    assert model.requests[-1].messages[-1].content == LONG
    [published] = [e for e in conv.hub.published if isinstance(e, ContextCompactedEvent)]
    assert published.window == 20_000 and published.trigger == "overflow"

    # Later turns plan against the learned window: compacted before sending, no refusal.
    for _ in range(3):
        assert (await conv.turn(LONG)).stop_reason == "end_turn"
    assert model.refused == 1
    assert [c.trigger for c in conv.compactions()][1:] and all(
        c.trigger == "auto" for c in conv.compactions()[1:]
    )
    assert all(c.window is None for c in conv.compactions()[1:])


async def test_a_refusal_without_a_number_plans_well_under_the_refused_size() -> None:
    model = WindowModel(
        window=20_000,
        calls_tool=False,
        refusal="the request exceeds the available context size, try increasing it",
    )
    conv = Conversation(config(window=200_000), model, BigTools(10))
    for _ in range(4):
        assert (await conv.turn(LONG)).stop_reason == "end_turn"
    assert model.refused == 1
    [compaction] = conv.compactions()
    assert compaction.window is not None
    assert compaction.window.tokens < 20_000


async def test_a_window_learned_for_another_model_is_not_applied() -> None:
    model = WindowModel(window=20_000, calls_tool=False)
    conv = Conversation(config(window=200_000), model, BigTools(10))
    for _ in range(4):
        await conv.turn(LONG)
    assert model.refused == 1
    # Another model of the same conversation, with a large real window.
    conv.cfg = conv.cfg.with_model("test/other")
    model.window = 200_000
    for _ in range(3):
        await conv.turn(LONG)
    assert len(conv.compactions()) == 1  # nothing compacted against the old window
