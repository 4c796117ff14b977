"""Questions across a fleet: this daemon's pending questions are posted on the store's
board (`port.QuestionBoard`), where a client of any member lists and answers them;
answers stored there are delivered to the waiting question here and checked as a local
client's answer would be (an invalid one is cleared, and the question waits on).

The board is synced by polling, every quarter second: a question is offered to other
members and its answer delivered within about that. First answer stored wins among
members (compare-and-set); a local answer resolves the question at once here. An
answer given on another member is checked there against the posted question first (an
invalid one is -32602 to its client and never stored); the asking member checks again.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio

from jpd.conversation.port import QuestionBoard
from jpd.inquiry.pending import PendingQuestions
from jpd.protocol.errors import InvalidParams, NotFound
from jpd.protocol.question import validate_answer
from jpd.protocol.server_requests import PendingInfo

log = logging.getLogger(__name__)

INTERVAL = 0.25
Key = tuple[str, str, str]


class SharedQuestions:
    """See the module docstring."""

    def __init__(self, board: QuestionBoard, questions: PendingQuestions) -> None:
        self._board = board
        self._questions = questions
        self._posted: set[Key] = set()

    async def run(self) -> None:
        while True:
            await anyio.sleep(INTERVAL)
            try:
                await self.sync()
            except Exception as exc:  # the store is away: the next round catches up
                log.warning("could not share questions: %s", exc)

    async def sync(self) -> None:
        mine = {(i.conversation_id, i.turn_id, i.inquiry_id): i for i in self._questions.pending()}
        for key in set(mine) - self._posted:
            await self._board.post(key, mine[key].model_dump_json())
            self._posted.add(key)
        for key in self._posted - set(mine):
            await self._board.withdraw(key)
            self._posted.discard(key)
        for key, value, remember, by in await self._board.answers():
            if key not in mine:
                continue  # resolved here meanwhile: withdrawn at the next round
            conversation_id, turn_id, inquiry_id = key
            try:
                self._questions.answer(
                    inquiry_id,
                    value,
                    remember,
                    by,
                    conversation_id=conversation_id,
                    turn_id=turn_id,
                )
            except InvalidParams as exc:
                log.info("answer to %s from another member refused: %s", inquiry_id, exc)
                await self._board.reopen(key, by)
            except NotFound:
                pass

    async def others(self) -> list[PendingInfo]:
        """Questions other members wait on (for `inquiry/list`)."""
        found = []
        for info in await self._board.others():
            try:
                found.append(PendingInfo.model_validate_json(info))
            except ValueError:
                continue  # posted by a newer jpd: not ours to show
        return found

    async def answer(
        self,
        missing: NotFound,
        inquiry_id: str,
        value: Any,
        remember: bool,
        by: str,
        conversation_id: str | None,
        turn_id: str | None,
    ) -> None:
        """Answer a question pending on another member; raises as `inquiry/answer` does
        (an answer its question would refuse is -32602 here, and is not stored)."""
        matches = [
            info
            for info in await self.others()
            if info.inquiry_id == inquiry_id
            and conversation_id in (None, info.conversation_id)
            and turn_id in (None, info.turn_id)
        ]
        if len(matches) == 1:
            _check(matches[0], value)
        outcome = await self._board.answer(
            inquiry_id, conversation_id, turn_id, value, remember, by
        )
        if outcome == "already":
            raise NotFound(f"inquiry {inquiry_id} was already answered")
        if outcome == "ambiguous":
            raise InvalidParams(
                f"inquiry {inquiry_id} is pending in several conversations: pass conversationId"
            )
        if outcome == "missing":
            raise missing


def _check(info: PendingInfo, value: Any) -> None:
    """Refuse what the asking member would refuse (`PendingQuestions.answer`)."""
    try:
        if info.permission is not None:
            if not isinstance(value, bool):
                raise ValueError("a permission answer must be true (allow) or false (deny)")
        elif info.prompt is not None:
            validate_answer(info.prompt.question, value)
    except ValueError as exc:
        raise InvalidParams(f"invalid answer for {info.inquiry_id}: {exc}") from exc
