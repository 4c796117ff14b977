"""Searching conversations (`conversation/grep`, protocol.md 5.28): a regular expression
over the text of every message, line by line, with lines of context."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from jpd.conversation import events as ev

Role = Literal["user", "assistant", "tool", "summary"]


@dataclass
class Hit:
    event: int
    role: Role
    line_number: int
    line: str
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)


def texts(events: list[ev.Event]) -> Iterator[tuple[int, Role, str]]:
    """`(position, role, text)` of each message the user or the model would read."""
    for position, event in enumerate(events):
        if isinstance(event, ev.ChatRequest):
            yield position, "user", event.content
        elif isinstance(event, ev.ChatResponse) and event.message:
            yield position, "assistant", event.message
        elif isinstance(event, ev.ToolCallResponse):
            yield position, "tool", event.content
        elif isinstance(event, ev.ContextCompacted) and event.summary:
            yield position, "summary", event.summary


def grep(events: list[ev.Event], pattern: re.Pattern[str], context: int) -> Iterator[Hit]:
    """Every line of the messages in `events` that `pattern` matches (searched, not
    anchored), with up to `context` lines before and after it."""
    for position, role, text in texts(events):
        lines = text.splitlines()
        for index, line in enumerate(lines):
            if pattern.search(line):
                yield Hit(
                    event=position,
                    role=role,
                    line_number=index + 1,
                    line=line,
                    before=lines[max(0, index - context) : index],
                    after=lines[index + 1 : index + 1 + context],
                )
