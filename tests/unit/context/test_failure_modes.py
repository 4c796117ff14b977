"""Every failure mode of compaction (issue 27): overflow while compacting, cut-off or
empty summaries, a compaction that would not shrink, a stale count, a big pasted
message, a switch to a smaller model, a crash mid-compaction, the off switch, and the
threshold moving both ways."""

from __future__ import annotations

import itertools

import anyio

from jpd.conversation import events as ev
from jpd.llm.history import TRIM_NOTE, MessageHistory
from tests.unit.context.fakes import BigTools, Conversation, WindowModel, config


def summaries(conv: Conversation) -> list[ev.ContextCompacted]:
    return [c for c in conv.compactions() if c.method in ("summary", "trim")]


async def grow(conv: Conversation, turns: int) -> None:
    for n in range(turns):
        turn = await conv.turn(f"question {n}")
        assert turn.stop_reason == "end_turn", conv.errors()


async def test_a_summary_request_that_overflows_drops_its_oldest_part() -> None:
    model = WindowModel(window=20_000, summary=["OVERFLOW", "Goal: the shorter one."])
    conv = Conversation(config(), model, BigTools(6_000))
    await grow(conv, 12)
    first = summaries(conv)[0]
    assert first.method == "summary" and first.summary is not None
    assert first.summary.startswith("Goal: the shorter one.")
    # The retried request was shorter than the refused one.
    asks = [r for r in model.requests if r.messages[-1].content.startswith("Stop here")]
    assert len(asks[1].messages) < len(asks[0].messages)


async def test_cut_off_or_empty_summaries_are_retried_once_then_trimmed() -> None:
    model = WindowModel(window=20_000, summary=["CUT", ""])
    conv = Conversation(config(), model, BigTools(6_000))
    await grow(conv, 12)
    first = summaries(conv)[0]
    assert model.summaries >= 2  # the cut-off one, then the empty retry
    assert first.method == "trim" and first.model is None
    assert TRIM_NOTE in MessageHistory(conv.log.events).messages()[0].content


async def test_a_good_retry_after_a_cut_off_summary_is_used() -> None:
    model = WindowModel(window=20_000, summary=["CUT", "Goal: complete."])
    conv = Conversation(config(), model, BigTools(6_000))
    await grow(conv, 12)
    assert summaries(conv)[0].method == "summary"
    assert summaries(conv)[0].summary.startswith("Goal: complete.")  # type: ignore[union-attr]


async def test_no_compaction_is_recorded_that_would_not_shrink_the_context() -> None:
    # One question and its answer: nothing older than the tail to fold.
    model = WindowModel(window=20_000, calls_tool=False, answer="ok")
    conv = Conversation(config(window=20_000), model, BigTools(10))
    turn = await conv.turn("x" * 45_000)  # about 15k of the fake's tokens: over 0.8 x usable
    assert turn.stop_reason == "end_turn"
    assert conv.compactions() == []


async def test_a_stale_count_does_not_loop_compactions() -> None:
    # The fake's tokens are a third longer than the estimator assumes: the first count
    # is low, usage corrects it, and a compaction resets it (no re-trigger every call).
    conv = Conversation(config(), WindowModel(window=20_000), BigTools(6_000))
    await grow(conv, 40)
    events = conv.log.events
    positions = [i for i, e in enumerate(events) if isinstance(e, ev.ContextCompacted)]
    summary_positions = [
        i
        for i in positions
        if events[i].method == "summary"  # type: ignore[union-attr]
    ]
    gaps = [b - a for a, b in itertools.pairwise(summary_positions)]
    assert all(gap > 10 for gap in gaps)  # several turns apart, never back to back
    for event in conv.compactions():
        assert event.tokens_after < event.tokens_before


async def test_a_big_pasted_message_compacts_before_it_is_sent() -> None:
    model = WindowModel(window=20_000)
    conv = Conversation(config(), model, BigTools(3_000))
    await grow(conv, 4)
    assert summaries(conv) == []
    turn = await conv.turn("please review: " + "y" * 30_000)  # jumps past the threshold
    assert turn.stop_reason == "end_turn"
    assert model.refused == 0 and summaries(conv)
    # The pasted message itself is kept verbatim in what the model is sent.
    assert any("y" * 30_000 in m.content for m in model.requests[-1].messages)


async def test_a_message_larger_than_the_window_is_a_clear_error_not_a_loop() -> None:
    model = WindowModel(window=20_000, calls_tool=False)
    conv = Conversation(config(), model, BigTools(10))
    await grow(conv, 2)
    turn = await conv.turn("z" * 90_000)
    assert turn.stop_reason == "error"
    assert "prompt is too long" in (conv.errors()[-1] or "")
    assert model.refused <= 2  # sent, compacted once, sent once more: never a loop
    ok = await conv.turn("a short question")  # the conversation is not dead
    assert ok.stop_reason == "end_turn" or "too long" in (conv.errors()[-1] or "")


async def test_switching_to_a_smaller_model_compacts_for_its_window() -> None:
    model = WindowModel(window=100_000)
    conv = Conversation(config(window=100_000), model, BigTools(6_000))
    await grow(conv, 10)
    assert summaries(conv) == []
    conv.cfg = config(window=20_000)
    conv.model.window = 20_000
    await grow(conv, 2)
    assert model.refused == 0 and summaries(conv)


async def test_an_overflow_the_count_missed_compacts_once_and_retries() -> None:
    # The configured window is larger than the model's real one.
    model = WindowModel(window=20_000)
    conv = Conversation(config(window=60_000), model, BigTools(6_000))
    await grow(conv, 12)
    assert model.refused >= 1
    assert any(c.trigger == "overflow" for c in conv.compactions())


async def test_a_crash_mid_compaction_leaves_the_conversation_as_it_was() -> None:
    model = WindowModel(window=20_000)
    conv = Conversation(config(), model, BigTools(6_000))
    real = model._events
    summarising = anyio.Event()

    async def slow_summary(request, size):  # type: ignore[no-untyped-def]
        if request.messages[-1].content.startswith("Stop here"):
            summarising.set()
            await anyio.sleep_forever()
        async for item in real(request, size):
            yield item

    model._events = slow_summary  # type: ignore[method-assign]
    turns = []
    async with anyio.create_task_group() as tg:

        async def drive() -> None:
            for n in range(30):
                turn_task = conv.turn(f"question {n}")
                turns.append(await turn_task)
                if turns[-1].stop_reason != "end_turn":
                    return

        async def cancel_when_summarising() -> None:
            await summarising.wait()
            # The daemon stops mid-summary: every running turn is cancelled.
            tg.cancel_scope.cancel()

        tg.start_soon(drive)
        tg.start_soon(cancel_when_summarising)
    assert summaries(conv) == []  # nothing half-written
    # Replaying the log gives the view the turn had: every original event is there.
    replay = MessageHistory(conv.log.events).messages()
    assert replay == conv.history.messages()


async def test_the_off_switch_turns_compaction_off() -> None:
    model = WindowModel(window=20_000)
    conv = Conversation(config(compact=False), model, BigTools(6_000))
    for n in range(14):
        await conv.turn(f"question {n}")
    assert conv.compactions() == []
    assert any("prompt is too long" in (e or "") for e in conv.errors())


async def test_the_threshold_moves_both_ways() -> None:
    def first_compaction_size(compact_at: float) -> int:
        return next(c.tokens_before for c in conv.compactions())

    sizes = {}
    for compact_at in (0.5, 0.95):
        conv = Conversation(
            config(compact_at=compact_at), WindowModel(window=20_000), BigTools(3_000)
        )
        await grow(conv, 20)
        sizes[compact_at] = first_compaction_size(compact_at)
    assert sizes[0.5] < sizes[0.95]
    assert sizes[0.95] > 0.8 * (20_000 - 2_500)  # above the default of 0.8
