"""The pending questions clients list and answer (`inquiry/list`, `inquiry/answer`):
this daemon's, and in a fleet also those pending on the other members."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jpd.inquiry.pending import PendingQuestions
from jpd.protocol.client_port import ClientLink
from jpd.protocol.errors import NotFound
from jpd.protocol.server_requests import PendingInfo

if TYPE_CHECKING:  # a fleet's only (start-up imports stay light)
    from jpd.core.shared_questions import SharedQuestions

log = logging.getLogger(__name__)


class Inquiries:
    """Lists and answers pending questions; `shared` is the fleet's board (None alone)."""

    def __init__(self, questions: PendingQuestions, shared: SharedQuestions | None) -> None:
        self._questions = questions
        self._shared = shared

    def pending_here(self) -> list[PendingInfo]:
        """This member's pending questions (all of them outside a fleet), at once."""
        return self._questions.pending()

    async def pending(self) -> list[PendingInfo]:
        """Questions and permission requests waiting for an answer (in a fleet, also
        those of the other members)."""
        mine = self._questions.pending()
        if self._shared is None:
            return mine
        try:
            others = await self._shared.others()
        except Exception as exc:  # the store is away: this member's questions still list
            log.warning("could not list the questions of other members: %s", exc)
            others = []
        return sorted([*mine, *others], key=lambda i: i.asked_at)

    async def answer(
        self,
        link: ClientLink,
        inquiry_id: str,
        answer: Any,
        remember: bool,
        conversation_id: str | None = None,
        turn_id: str | None = None,
    ) -> None:
        """Answer a pending question from any client (first valid answer wins); in a
        fleet, also one pending on another member."""
        by = f"client-{link.link_id}"
        try:
            self.answer_here(link, inquiry_id, answer, remember, conversation_id, turn_id)
        except NotFound as missing:
            if self._shared is None:
                raise
            await self._shared.answer(
                missing, inquiry_id, answer, remember, by, conversation_id, turn_id
            )

    def answer_here(
        self,
        link: ClientLink,
        inquiry_id: str,
        answer: Any,
        remember: bool,
        conversation_id: str | None = None,
        turn_id: str | None = None,
    ) -> None:
        """Answer a question pending in this daemon, at once (NotFound if none is)."""
        self._questions.answer(
            inquiry_id,
            answer,
            remember,
            by=f"client-{link.link_id}",
            conversation_id=conversation_id,
            turn_id=turn_id,
        )

    def claim_here(
        self,
        link: ClientLink,
        inquiry_id: str,
        answer: Any,
        remember: bool,
        conversation_id: str | None = None,
        turn_id: str | None = None,
    ) -> Callable[[], None]:
        """`answer_here` from any thread (a connection's reader): the answer is checked
        and wins the question at once; the returned step applies it on the loop."""
        return self._questions.claim(
            inquiry_id,
            answer,
            remember,
            by=f"client-{link.link_id}",
            conversation_id=conversation_id,
            turn_id=turn_id,
        )

    def close_turn(self, turn_id: str) -> None:
        """From any thread: the questions of `turn_id`, whose cancel was answered, take
        no more answers."""
        self._questions.close_turn(turn_id)
