"""Pending questions: questions and permission requests waiting for a human answer.

A pending request is offered (as a server-to-client request) to every attached client
able to answer it; the first valid answer wins, every client is then told with
`inquiry/resolved`. An invalid answer is sent back to that client with the error and
the question stays open. A request may also wait with nobody to ask (`defer`): it is
offered to each capable client that attaches later, and `inquiry/answer` from any
client answers it.

A question is claimed once, from any thread (`claim`, under one lock), by whatever
settles it first: an `inquiry/answer` (a connection's reader thread validates and claims
it at once, jpd.rpc.answers), a client's `inquiry/prompt` result or dismissal, the
fleet's board, the end of its wait (timeout, nobody left) or of its turn (cancel). Every
later resolver loses: an answer then gets -32001 as if the question were gone. The loop
then applies the claim (`inquiry/resolved` to every client, the asker woken).
"""

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import anyio
from anyio.abc import TaskGroup

from jpd.protocol.base import WireModel
from jpd.protocol.client_port import ClientLink
from jpd.protocol.errors import (
    InvalidClientResult,
    InvalidParams,
    JpdError,
    NotFound,
    RequestCancelled,
)
from jpd.protocol.method_table import INQUIRY_RESOLVED, ServerRequest
from jpd.protocol.server_requests import InquiryResolvedParams, PendingInfo

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Answer:
    value: Any
    remember: bool
    by: str


@dataclass(frozen=True)
class Dismissed:
    """A human cancelled the question (reason `user`)."""

    by: str


Reply = Answer | Dismissed
"""What a client made of a pending request."""


class _Closed:
    """The claim of a question whose wait ended with no answer (timeout, nobody left to
    ask, its turn cancelled): no answer is accepted any more."""


_CLOSED = _Closed()


@dataclass
class Request:
    """What to ask and how to read the answer."""

    info: PendingInfo
    method: ServerRequest[Any, Any]
    params: Callable[[str | None], WireModel]
    """Builds the request params, given the previous invalid-answer error if any."""
    can_answer: Callable[[ClientLink], bool]
    parse: Callable[[Any], tuple[Any, bool]]
    """Validates a client's result (a `method.result`) -> (answer, remember); raises ValueError."""
    parse_direct: Callable[[Any, bool], tuple[Any, bool]]
    """Validates an `inquiry/answer` value -> (answer, remember); raises ValueError."""


@dataclass
class _Pending:
    request: Request
    tg: TaskGroup
    offers: dict[int, ClientLink] = field(default_factory=dict)
    claim: Reply | _Closed | None = None
    """Who settled it first; set once, from any thread, under `PendingQuestions._lock`."""
    outcome: Reply | None = None
    """The claimed reply once the loop applied it (clients told, the asker woken)."""
    told: bool = False
    """Every client was sent `inquiry/resolved` (exactly once per question)."""
    changed: anyio.Event = field(default_factory=anyio.Event)

    def poke(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()


class PendingQuestions:
    """All pending human questions of the daemon."""

    def __init__(
        self,
        subscribers: Callable[[str], list[ClientLink]],
        everyone: Callable[[], list[ClientLink]],
    ) -> None:
        self._subscribers = subscribers
        self._everyone = everyone
        self._pending: dict[tuple[str, str, str], _Pending] = {}
        self._lock = threading.Lock()
        """Guards `_pending` and every claim: reader threads claim answers too."""

    async def ask(self, request: Request, *, wait: bool, wait_limit: float | None) -> Reply | None:
        """Offer `request` to capable attached clients and await the first answer.

        With `wait`, keep waiting for clients to attach (up to `wait_limit` seconds).
        Returns None when nobody answered (no capable client, all went away, or timeout).
        """
        info = request.info.model_copy(update={"deferred": wait})
        request.info = info
        if not wait and not any(map(request.can_answer, self._subscribers(info.conversation_id))):
            # Nobody to ask: not even listed, so that a client arriving now is offered it
            # once, under the detached policy, not in a round that ends at once.
            return None
        # Tool call ids repeat across conversations (`call_1`): an inquiry id alone is
        # not unique, its conversation and turn are part of the key.
        key = (info.conversation_id, info.turn_id, info.inquiry_id)
        pending: _Pending | None = None
        try:
            async with anyio.create_task_group() as tg:
                pending = _Pending(request, tg)
                with self._lock:
                    self._pending[key] = pending
                for link in self._subscribers(info.conversation_id):
                    self._offer(pending, link)
                with anyio.move_on_after(wait_limit if wait else None):
                    while pending.outcome is None and (wait or pending.offers):
                        await pending.changed.wait()
                # An answer claimed meanwhile (its settling still queued) wins over the
                # timeout or the last client going away.
                outcome = self._finish(pending, "timed_out" if wait else None)
                tg.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            # The turn ended (cancelled) while asking: clients must dismiss the prompt,
            # unless an answer was accepted just before (they were told it was).
            if pending is not None:
                self._finish(pending, "cancelled")
            raise
        finally:
            with self._lock:
                self._pending.pop(key, None)
        return outcome

    def client_ready(self, link: ClientLink, conversation_id: str | None = None) -> None:
        """A client attached or (re-)initialized: offer it what it can answer."""
        for pending in list(self._pending.values()):
            info = pending.request.info
            if conversation_id is None or info.conversation_id == conversation_id:
                self._offer(pending, link)

    def answer(
        self,
        inquiry_id: str,
        value: Any,
        remember: bool,
        by: str,
        conversation_id: str | None = None,
        turn_id: str | None = None,
    ) -> None:
        """`inquiry/answer` from any client, on the loop; invalid answers raise and leave
        it open (`claim`)."""
        self.claim(inquiry_id, value, remember, by, conversation_id, turn_id)()

    def claim(
        self,
        inquiry_id: str,
        value: Any,
        remember: bool,
        by: str,
        conversation_id: str | None = None,
        turn_id: str | None = None,
    ) -> Callable[[], None]:
        """`inquiry/answer` from any thread: validate the answer and claim the question
        for it at once (first valid answer wins). Returns what applies it, to run on the
        loop; raises NotFound (nothing open, or settled already) or InvalidParams (the
        answer does not fit: the question stays open).

        `conversation_id` and `turn_id` pick among questions with the same inquiry id;
        when several match and neither tells them apart, nothing is answered.
        """
        with self._lock:
            matches = [
                p
                for (conversation, turn, inquiry), p in self._pending.items()
                if inquiry == inquiry_id
                and p.claim is None
                and conversation_id in (None, conversation)
                and turn_id in (None, turn)
            ]
        if not matches:
            raise _gone(inquiry_id)
        if len(matches) > 1:
            where = ", ".join(sorted(p.request.info.conversation_id for p in matches))
            raise InvalidParams(
                f"inquiry {inquiry_id} is pending in several conversations ({where}): "
                "pass conversationId"
            )
        (pending,) = matches
        try:
            answer, keep = pending.request.parse_direct(value, remember)
        except ValueError as exc:
            raise InvalidParams(f"invalid answer for {inquiry_id}: {exc}") from exc
        if not self._claim(pending, Answer(answer, keep, by)):
            raise _gone(inquiry_id)  # another answer won while this one was checked
        return lambda: self._settle(pending)

    def close_turn(self, turn_id: str) -> None:
        """From any thread: no answer to the questions of `turn_id` is accepted any more
        (its cancel was answered; the loop ends the turn, and tells the clients)."""
        with self._lock:
            for (_, turn, _), pending in self._pending.items():
                if turn == turn_id and pending.claim is None:
                    pending.claim = _CLOSED

    def pending(self) -> list[PendingInfo]:
        """Everything waiting for an answer, oldest first."""
        with self._lock:  # reader threads list them too
            infos = [p.request.info for p in self._pending.values() if p.claim is None]
        return sorted(infos, key=lambda i: i.asked_at)

    def _offer(self, pending: _Pending, link: ClientLink) -> None:
        if pending.claim is not None or link.link_id in pending.offers:
            return
        if not pending.request.can_answer(link):
            return
        pending.offers[link.link_id] = link
        pending.request.info = pending.request.info.model_copy(update={"deferred": False})
        pending.tg.start_soon(self._ask_client, pending, link)

    async def _ask_client(self, pending: _Pending, link: ClientLink) -> None:
        request = pending.request
        error: str | None = None
        try:
            while pending.claim is None:
                try:
                    result = await link.request(request.method, request.params(error))
                except RequestCancelled:
                    self._resolve(pending, Dismissed(by=_who(link)))
                    return
                except InvalidClientResult as exc:
                    error = exc.message
                    continue
                except (JpdError, Exception) as exc:
                    name = request.method.name
                    log.info("client %s could not answer %s: %s", link.link_id, name, exc)
                    return
                try:
                    answer, remember = request.parse(result)
                except ValueError as exc:
                    error = str(exc)
                    continue
                self._resolve(pending, Answer(answer, remember, _who(link)))
        finally:
            pending.offers.pop(link.link_id, None)
            pending.poke()

    def _resolve(self, pending: _Pending, outcome: Reply) -> None:
        """On the loop: settle `pending` with `outcome` unless something claimed it."""
        if self._claim(pending, outcome):
            self._settle(pending)

    def _claim(self, pending: _Pending, claim: Reply | _Closed) -> bool:
        with self._lock:
            if pending.claim is not None:
                return False
            pending.claim = claim
            return True

    def _settle(self, pending: _Pending) -> None:
        """On the loop: apply a claimed reply (once): tell every client, wake the asker."""
        claim = pending.claim
        if pending.told or not isinstance(claim, Answer | Dismissed):
            return
        pending.outcome = claim
        pending.told = True
        kind: Literal["answered", "cancelled"] = (
            "answered" if isinstance(claim, Answer) else "cancelled"
        )
        self._broadcast(pending, kind, claim.by)
        pending.poke()

    def _finish(
        self, pending: _Pending, closing: Literal["timed_out", "cancelled"] | None
    ) -> Reply | None:
        """On the loop, as the wait ends: the reply claimed so far (applied now), else
        None, closing the question to later answers and telling clients `closing`."""
        self._claim(pending, _CLOSED)
        if isinstance(pending.claim, _Closed):
            if closing is not None and not pending.told:
                pending.told = True
                self._broadcast(pending, closing, None)
            return None
        self._settle(pending)
        return pending.outcome

    def _broadcast(
        self,
        pending: _Pending,
        outcome: Literal["answered", "cancelled", "timed_out"],
        by: str | None,
    ) -> None:
        info = pending.request.info
        params = InquiryResolvedParams(
            inquiry_id=info.inquiry_id,
            conversation_id=info.conversation_id,
            outcome=outcome,
            answered_by=by,
        )
        for link in self._everyone():
            link.notify(INQUIRY_RESOLVED, params)


def _gone(inquiry_id: str) -> NotFound:
    return NotFound(f"no pending inquiry {inquiry_id} (already answered, or never asked)")


def _who(link: ClientLink) -> str:
    return f"client-{link.link_id}"


def now() -> datetime:
    """Timestamp for `askedAt`."""
    return datetime.now(UTC)
