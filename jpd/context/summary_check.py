"""Whether a summary is worth keeping: measured against the instruction it answered and
the conversation it replaces (protocol.md 12.5).

A small model asked to summarise often restates the request instead ("The user's goal:
to create a list of 120 words that summarize…"), and such a text would then stand in
the context as the user's goal. Three measures catch it:

- echo: the share of the summary's word trigrams found in the instruction (a summary
  shares almost none; a restatement many), plus words only the instruction explains
  (`summar…`, the word limit) where the conversation never used them;
- grounding: the share of the summary's distinctive words (not stop words, not the
  instruction's) found in the conversation. A summary names what was discussed.
- coverage: the share of the exchanges it replaces (a user's message and the replies
  to it) that the summary names something of. "The Mona Lisa hangs in the Louvre." is
  grounded in a conversation of five questions but speaks only of the last one.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

ECHO_LIMIT = 0.2
"""A summary with this share of its trigrams in the instruction restates it."""
GROUNDED_MIN = 0.4
"""A summary with less than this share of its distinctive words in the conversation
says nothing of it."""
MIN_DISTINCTIVE = 4
"""Grounding is judged only on summaries with at least this many distinctive words."""

COVERED_MIN = 0.35
"""A summary naming something of less than this share of the exchanges it replaces
speaks of too little of the conversation (SmolLM2's echoes name none; a summary of only
the latest answer one in several)."""
MIN_EXCHANGES = 3
"""Coverage is judged only on at least this many exchanges with content words."""
_STEM = 5
"""Words match on this many leading letters ("capitals" names "capital")."""

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_STOP_WORDS = """a an and are as at be been but by can could did do does for from had has have
he her his how i if in into is it its just me more most my no not of on one or our out over
own she so some such than that the their them then there these they this those to too up
very was we were what when where which while who why will with would you your also about
after again all any because before being both each few further here once only other same
should through under until user users assistant asked asks wants wanted said says
yes yeah okay ok thanks thank please sure tell know like get got let now go"""
_STOP = frozenset(_STOP_WORDS.split())


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _trigrams(words: list[str]) -> set[tuple[str, str, str]]:
    return {(a, b, c) for a, b, c in zip(words, words[1:], words[2:], strict=False)}


def _instruction_only(word: str) -> bool:
    # Words about the task of summarising itself, under any spelling.
    return word.startswith(("summar", "compact"))


def _stems(words: list[str], skip: set[str]) -> set[str]:
    return {w[:_STEM] for w in words if len(w) > 2 and w not in _STOP and w not in skip}


def coverage(summary: str, exchanges: Sequence[str], instruction: str) -> float | None:
    """The share of `exchanges` (each a user's message and the replies to it, in the part
    the summary replaces) that the summary names something of; None when fewer than
    `MIN_EXCHANGES` have content words.

    An exchange's content words are its words but stop words and the instruction's;
    those that recur in more than a third of them ("capital" in a run of questions on
    capitals, a small model's stock phrases) name no one exchange, so only its own words
    count while it has any."""
    taught = set(_words(instruction))
    named = _stems(_words(summary), taught)
    units = [stems for text in exchanges if (stems := _stems(_words(text), taught))]
    if len(units) < MIN_EXCHANGES:
        return None
    seen = Counter(stem for stems in units for stem in stems)
    common = {stem for stem, n in seen.items() if n >= 2 and n * 3 > len(units)}

    def names(stems: set[str]) -> bool:
        # Prefixes match: "fix" is named by "fixed", "capital" by "capitals".
        own = (stems - common) or stems
        return any(a.startswith(b) or b.startswith(a) for a in own for b in named)

    return sum(names(stems) for stems in units) / len(units)


def problem(
    summary: str, instruction: str, conversation: str, exchanges: Sequence[str] = ()
) -> str | None:
    """Why `summary` is not worth keeping (None: it is). `conversation`: the text it
    replaces; `exchanges`: the same cut at each user message, for the coverage measure."""
    words = _words(summary)
    if not words:
        return "it is empty"
    said = set(_words(conversation))
    taught = _words(instruction)
    own = _trigrams(words)
    if own:
        echo = len(own & _trigrams(taught)) / len(own)
        if echo >= ECHO_LIMIT:
            return f"it restates the instructions ({echo:.0%} of its phrases)"
    meta = [w for w in words if _instruction_only(w) and w not in said]
    if len(meta) >= 2:
        return "it is about the instructions, not the conversation"
    known = set(taught)
    distinctive = [
        w for w in words if len(w) > 3 and w not in _STOP and w not in known and not w.isdigit()
    ]
    if len(distinctive) >= MIN_DISTINCTIVE:
        stems = {w[:_STEM] for w in said}  # "capitals" is grounded in "capital"
        grounded = sum(w[:_STEM] in stems for w in distinctive) / len(distinctive)
        if grounded < GROUNDED_MIN:
            return f"it says little of the conversation ({grounded:.0%} of its words)"
    covered = coverage(summary, exchanges, instruction)
    if covered is not None and covered < COVERED_MIN:
        return f"it names too little of the conversation ({covered:.0%} of its exchanges)"
    return None
