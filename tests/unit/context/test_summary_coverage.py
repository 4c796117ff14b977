"""How much of the conversation a summary covers (protocol.md 12.5): the share of the
exchanges it replaces that it names something of. Tuned on what SmolLM2-135M says on
the seventy-question conversation (tests/e2e/test_local_long_conversation.py)."""

from __future__ import annotations

import pytest

from jpd.context.summary import SMALL_INSTRUCTION, _exchanges
from jpd.context.summary_check import COVERED_MIN, coverage, problem
from jpd.llm import base as llm
from jpd.llm.history import SUMMARY_HEADER, TRIM_NOTE
from tests.unit.context.fakes import BigTools, Conversation, WindowModel, config

# The head of the first compaction SmolLM2 made of the seventy questions, as it answered
# them (cut off at 24 tokens): its stock phrases recur in every answer.
EXCHANGES = [
    "What is the capital of France?\nL'Étoile, la Marseillaise. Paris is the capital of "
    "France and a major global city in",
    "What color is the sky?\nLa lumière, le monde. The sky is a brilliant blue color with "
    "light and shadow on it.",
    *(
        f"What is the capital of {country}?\nThe capital of {country} is {city}. It's a city "
        "that has been known for its culture and history, and it's"
        for country, city in (
            ("Japan", "Tokyo"),
            ("Italy", "Rome"),
            ("Spain", "Madrid"),
            ("Germany", "Berlin"),
            ("Canada", "Ottawa"),
            ("Brazil", "Rio de Janeiro"),
        )
    ),
    *(
        f"What color is {thing}?\nThe color of {thing} is a beautiful shade of {color}, "
        f'often referred to as the "{color}est" in nature. It'
        for thing, color in (
            ("grass", "green"),
            ("snow", "white"),
            ("coal", "gray"),
            ("blood", "red"),
            ("milk", "white"),
        )
    ),
]
SAID = "\n".join(EXCHANGES)

# What SmolLM2 wrote when asked for the summary, every time.
SMOLLM2 = [
    "The user's goal: to summarize everything above and write only the summary.\n"
    "Constraints quoted verbatim: no additional constraints were provided.",
    "The user's goal: to summarize everything above and write only the summary.\n"
    "Constraints quoted verbatim: no more than 120 words, no bold formatting, no "
    "enumerations.",
]
NARROW = [
    "The capital of Brazil is Rio de Janeiro.",  # the latest answer only
    "The user asked for the capitals of countries and the colors of things.",  # topics only
    "Paris is the capital of France.",
]
BROAD = [
    "Capitals: France Paris, Japan Tokyo, Italy Rome, Spain Madrid, Germany Berlin, Canada "
    "Ottawa, Brazil Rio de Janeiro. Colors: sky blue, grass green, snow white, coal gray, "
    "blood red, milk white.",
    # Names the answers rather than the questions.
    "The user quizzed capitals (Paris, Tokyo, Rome, Madrid, Berlin, Ottawa, Rio) and "
    "colours of nature: blue sky, green grass, white snow and milk, red blood.",
    # About half of it, briefly.
    "Goal: learn facts. France's capital is Paris; Japan's is Tokyo; Italy's Rome. The sky "
    "is blue, grass green, coal gray.",
]


@pytest.mark.parametrize("summary", SMOLLM2)
def test_smollm2s_summaries_cover_nothing(summary: str) -> None:
    assert coverage(summary, EXCHANGES, SMALL_INSTRUCTION) == 0
    assert problem(summary, SMALL_INSTRUCTION, SAID, EXCHANGES) is not None


@pytest.mark.parametrize("summary", NARROW)
def test_a_summary_of_one_part_is_refused(summary: str) -> None:
    covered = coverage(summary, EXCHANGES, SMALL_INSTRUCTION)
    assert covered is not None and covered < COVERED_MIN
    assert "names too little" in (problem(summary, SMALL_INSTRUCTION, SAID, EXCHANGES) or "")


@pytest.mark.parametrize("summary", BROAD)
def test_a_summary_of_most_of_it_is_kept(summary: str) -> None:
    covered = coverage(summary, EXCHANGES, SMALL_INSTRUCTION)
    assert covered is not None and covered >= COVERED_MIN
    assert problem(summary, SMALL_INSTRUCTION, SAID, EXCHANGES) is None


def test_the_mona_lisa_is_not_a_summary_of_five_questions() -> None:
    exchanges = [
        "Who wrote Hamlet?\nShakespeare wrote Hamlet.",
        "How far is the Moon?\nAbout 384,000 km.",
        "What is the boiling point of water?\n100 degrees Celsius at sea level.",
        "Who painted the Mona Lisa?\nLeonardo da Vinci.",
        "Where does it hang?\nThe Mona Lisa hangs in the Louvre.",
    ]
    summary = "The Mona Lisa hangs in the Louvre."
    said = "\n".join(exchanges)
    assert problem(summary, SMALL_INSTRUCTION, said) is None  # grounded, but…
    # Only the last exchange: the Mona Lisa recurs in two, so names neither alone.
    assert coverage(summary, exchanges, SMALL_INSTRUCTION) == pytest.approx(1 / 5)
    assert "names too little" in (problem(summary, SMALL_INSTRUCTION, said, exchanges) or "")
    full = "Hamlet is Shakespeare's; the Moon is 384,000 km away; water boils at 100 C."
    assert problem(full, SMALL_INSTRUCTION, said, exchanges) is None


def test_a_short_conversation_is_not_judged_on_coverage() -> None:
    exchanges = ["Who wrote Hamlet?\nShakespeare.", "And Faust?\nGoethe."]
    assert coverage("Goethe wrote Faust.", exchanges, SMALL_INSTRUCTION) is None
    assert (
        problem("Goethe wrote Faust.", SMALL_INSTRUCTION, "\n".join(exchanges), exchanges) is None
    )


def test_words_of_the_instruction_cover_nothing() -> None:
    # A conversation that uses the instruction's words: the summary must name the rest.
    exchanges = [f"Summarise the goal of step {n} in words.\nDone." for n in range(4)]
    assert coverage("The goal: summarise in words.", exchanges, SMALL_INSTRUCTION) == 0
    assert coverage("Four steps, each summarised.", exchanges, SMALL_INSTRUCTION) == 1


def test_exchanges_cut_at_each_user_message_and_leave_jpds_notes_out() -> None:
    head = list(
        enumerate(
            [
                llm.UserMessage(content=f"{TRIM_NOTE}\n\nEarlier: Paris is the capital."),
                llm.UserMessage(content="Which river?"),
                llm.AssistantMessage(
                    content="The Seine.",
                    tool_calls=(llm.ToolCallPart(id="c1", name="read", arguments={}),),
                ),
                llm.ToolResultMessage(tool_call_id="c1", content="tool output"),
                llm.AssistantMessage(content="It flows west."),
                llm.UserMessage(content=f"{SUMMARY_HEADER}\n\nGoal: rivers."),
                llm.UserMessage(content=TRIM_NOTE),
            ]
        )
    )
    assert _exchanges(head) == [
        "Earlier: Paris is the capital.",
        "Which river?\nThe Seine.\nIt flows west.",
        "Goal: rivers.",
        "",
    ]


async def test_a_summary_of_the_latest_question_only_falls_back_to_a_trim() -> None:
    topics = ["Hamlet", "the Moon", "boiling water", "Mars", "the Mona Lisa", "Everest"]
    summary = "The Mona Lisa hangs in the Louvre."
    model = WindowModel(window=4_096, summary=summary, calls_tool=False)
    conv = Conversation(config(window=4_096), model, BigTools(10))
    for n, topic in enumerate(topics):
        turn = await conv.turn(f"question {n} on {topic}: " + "lorem ipsum dolor " * 120)
        assert turn.stop_reason == "end_turn"
    assert model.summaries >= 1  # asked, measured, refused
    methods = {c.method for c in conv.compactions()}
    assert "trim" in methods and "summary" not in methods
    assert all(summary not in (c.summary or "") for c in conv.compactions())
