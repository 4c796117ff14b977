"""What the JSONL store answers to a fleet's questions (`port.ConversationStorage`):
one daemon owns its data dir, so there is nothing to share, to claim or to limit."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from jpd.conversation.events import TurnStart


class NoFleet:
    """The fleet's part of the storage port, for a store one daemon owns alone."""

    @property
    def takeover_interval(self) -> float | None:
        """None: a turn lock dies with its daemon; start-up recovery covers the rest."""
        return None

    async def share_blobs(self, conversation_id: str) -> None:
        """Nothing to do: blobs are files beside the log."""

    async def fetch_blobs(self, conversation_id: str) -> None:
        """Nothing to do: blobs are files beside the log."""

    async def turns_elsewhere(self) -> list[tuple[str, TurnStart]]:
        """[]: turns of another process on this data dir are not listed (as before)."""
        return []

    def limits_model_calls(self, provider: str) -> bool:
        """A daemon alone has no fleet-wide limits."""
        return False

    async def model_slot(self, provider: str) -> Callable[[], Awaitable[None]] | None:
        """No limit: nothing to hold."""
        return None

    def turn_stream(self) -> None:
        """None: one daemon owns a data dir; its clients follow its turns directly."""
        return None

    def question_board(self) -> None:
        """None: one daemon owns a data dir, its questions are its own."""
        return None
