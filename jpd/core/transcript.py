"""What a running turn has seen: the conversation's messages and its last model request.

The turn writes it and the inquiry backend reads it to build side requests. Both are
given it when they are created, so neither needs to point back at the other.
"""

from __future__ import annotations

from jpd.llm import base as llm
from jpd.llm.history import MessageHistory


class Transcript:
    """One turn's view of its conversation (the inquiry backend's `TurnView`)."""

    def __init__(self, history: MessageHistory) -> None:
        self.history = history
        """The conversation's messages; the turn extends it with each event it records."""
        self.last_request: llm.ModelRequest | None = None
        """The turn's latest model request (None before its first model call)."""

    def messages(self) -> list[llm.Message]:
        """The conversation so far as model messages."""
        return self.history.messages()
