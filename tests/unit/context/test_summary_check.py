"""A summary worth keeping (protocol.md 12.5): one that restates the instructions or says
nothing of the conversation is refused, and the compaction falls back to a trim that
keeps the latest turns verbatim. Measured on the small-context profile, where small
models write the summaries."""

from __future__ import annotations

import pytest

from jpd.context.summary import INSTRUCTION, SMALL_INSTRUCTION
from jpd.context.summary_check import problem
from tests.unit.context.fakes import BigTools, Conversation, WindowModel, config

CONVERSATION = """What is the capital of France?
The capital of France is Paris.
And of Japan? Keep answers to one line, always.
Tokyo is the capital of Japan.
Which river runs through Paris?
The Seine runs through Paris."""

ECHOES = [
    # SmolLM2's, as seen on the embedded model.
    "The user's goal: to create a list of 120 words that summarize everything above, "
    "their constraints quoted verbatim, what was done, what comes next.",
    "Summarise everything above in at most 120 words: the user's goal, their constraints "
    "quoted verbatim, what was done, what comes next.",
    "Goal: write a summary. Constraints: summarize in 120 words. Done: the summary.",
]
EMPTY_OF_IT = [
    "The conversation covered various interesting topics and the assistant provided "
    "helpful, detailed explanations throughout the discussion.",
]
GOOD = [
    "Goal: learn capitals. Constraints: 'Keep answers to one line, always.' Done: France "
    "is Paris, Japan is Tokyo, the Seine runs through Paris. Next: more capitals.",
    "The user asks about capitals: Paris (France), Tokyo (Japan); the Seine runs through "
    "Paris. Answers stay one line.",
]


@pytest.mark.parametrize("summary", ECHOES)
def test_a_restated_instruction_is_refused(summary: str) -> None:
    assert problem(summary, SMALL_INSTRUCTION, CONVERSATION) is not None


@pytest.mark.parametrize("summary", EMPTY_OF_IT)
def test_a_summary_that_says_nothing_of_the_conversation_is_refused(summary: str) -> None:
    assert "says little" in (problem(summary, SMALL_INSTRUCTION, CONVERSATION) or "")


@pytest.mark.parametrize("summary", GOOD)
@pytest.mark.parametrize("instruction", [SMALL_INSTRUCTION, INSTRUCTION])
def test_a_summary_of_the_conversation_is_kept(summary: str, instruction: str) -> None:
    assert problem(summary, instruction, CONVERSATION) is None


def test_a_conversation_about_summaries_may_be_summarised() -> None:
    talk = "Please summarize this report in 120 words.\nHere is a summary of the report."
    summary = "The user wanted a 120-word summary of the report; one was written."
    assert problem(summary, SMALL_INSTRUCTION, talk) is None


def test_empty_is_refused() -> None:
    assert problem("  ", SMALL_INSTRUCTION, CONVERSATION) == "it is empty"


async def test_an_echo_on_a_small_window_falls_back_to_a_trim() -> None:
    model = WindowModel(window=4_096, summary=ECHOES[0], calls_tool=False)
    conv = Conversation(config(window=4_096), model, BigTools(10))
    for n in range(6):
        turn = await conv.turn(f"question {n}: " + "lorem ipsum dolor " * 120)
        assert turn.stop_reason == "end_turn"
    methods = {c.method for c in conv.compactions()}
    assert "trim" in methods and "summary" not in methods
    assert model.summaries >= 1  # asked, measured, refused
    assert all(ECHOES[0] not in (c.summary or "") for c in conv.compactions())
    # The latest turns go on verbatim.
    last = model.requests[-1].messages
    assert any("question 5" in m.content for m in last)


async def test_a_good_summary_on_a_small_window_is_kept() -> None:
    summary = "Goal: questions about lorem ipsum dolor; question 0 to question 4 answered."
    model = WindowModel(window=4_096, summary=summary, calls_tool=False)
    conv = Conversation(config(window=4_096), model, BigTools(10))
    for n in range(6):
        await conv.turn(f"question {n}: " + "lorem ipsum dolor " * 120)
    assert any(c.method == "summary" for c in conv.compactions())
