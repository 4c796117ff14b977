"""Fakes for unit tests of the orchestration: a client port, an event log, an LLM backend.

`FakeLink` implements `jpd.protocol.client_port.ClientLink`: each server-to-client
request is handed, as its wire name and params, to its `answer` coroutine (or waits until
the test releases it), whose raw result is validated as the rpc layer does; every call is
recorded in its wire form.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio

from jpd.config.models import PartialAssistantConfig
from jpd.conversation import events as ev
from jpd.inquiry.pending import PendingQuestions
from jpd.inquiry.router import BackendError, QuestionContext
from jpd.protocol.base import WireModel
from jpd.protocol.client_port import ClientCapabilities, ClientLink, Notification
from jpd.protocol.method_table import ServerNotification, ServerRequest
from jpd.protocol.question import ANSWER_TYPE_NAMES

Handler = Callable[[str, dict[str, Any]], Awaitable[Any]]
P = TypeVar("P", bound=WireModel)
R = TypeVar("R", bound=WireModel)


class FakeLink:
    """One connected client; `answer` decides what it replies to each request."""

    def __init__(
        self,
        link_id: int,
        *,
        answer_types: tuple[str, ...] = ANSWER_TYPE_NAMES,
        permission: bool = True,
        answer: Handler | None = None,
    ) -> None:
        self._id = link_id
        self._capabilities = ClientCapabilities.model_validate(
            {"prompt_answer_types": answer_types, "permission": permission}
        )
        self.answer = answer
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.notifications: list[tuple[str, dict[str, Any]]] = []
        self.asked = anyio.Event()
        """Set at the first request."""

    @property
    def link_id(self) -> int:
        return self._id

    @property
    def capabilities(self) -> ClientCapabilities:
        return self._capabilities

    @property
    def workspace_root(self) -> Path | None:
        return None

    @property
    def peer_verified(self) -> bool:
        return True

    def notify(self, method: ServerNotification[P], params: P) -> None:
        self.notifications.append((method.name, params.to_wire()))

    def send(self, notification: Notification) -> None:
        self.notifications.append((notification.method.name, notification.wire))

    async def request(self, method: ServerRequest[P, R], params: P) -> R:
        wire = params.to_wire()
        self.requests.append((method.name, wire))
        self.asked.set()
        if self.answer is None:
            await anyio.sleep_forever()
        return method.read_result(await self.answer(method.name, wire))

    def resolved(self) -> list[dict[str, Any]]:
        """The `inquiry/resolved` params this client was sent."""
        return [p for m, p in self.notifications if m == "inquiry/resolved"]


def replies(*results: Any) -> Handler:
    """A handler answering successive requests with `results` (an exception is raised)."""
    queue = list(results)

    async def handler(method: str, params: dict[str, Any]) -> Any:
        result = queue.pop(0)
        if isinstance(result, BaseException):
            raise result
        return result

    return handler


@dataclass
class Clients:
    """The daemon's view of who is connected and subscribed (one conversation here)."""

    links: list[FakeLink] = field(default_factory=list)

    def subscribers(self, conversation_id: str) -> list[ClientLink]:
        return list(self.links)

    def everyone(self) -> list[ClientLink]:
        return list(self.links)

    def pending(self) -> PendingQuestions:
        return PendingQuestions(self.subscribers, self.everyone)


class FakeLog:
    """An `EventLog` in memory."""

    def __init__(self) -> None:
        self.events: list[ev.Event] = []
        self.syncs = 0

    def append(self, conversation_id: str, event: ev.Event) -> None:
        self.events.append(event)

    async def sync(self, conversation_id: str) -> None:
        self.syncs += 1

    def responses(self) -> list[dict[str, Any]]:
        """The recorded inquiry responses as stored on disk."""
        return [ev.event_to_json(e) for e in self.events if isinstance(e, ev.InquiryResponse)]


class FakeBackend:
    """The LLM inquiry backend: answers with `value`, or fails when `value` is an error."""

    def __init__(self, value: Any = "from the model") -> None:
        self.value = value
        self.asked: list[tuple[str, PartialAssistantConfig | None]] = []

    async def answer(self, ctx: QuestionContext, target: PartialAssistantConfig | None) -> Any:
        self.asked.append((ctx.inquiry_id, target))
        if isinstance(self.value, BackendError):
            raise self.value
        return self.value


async def until_pending(questions: PendingQuestions, *, deferred: bool = False) -> None:
    """Yield until an asking task has registered its question (no fixed sleep); with
    `deferred`, until it waits under the detached policy `defer`."""
    with anyio.fail_after(10):
        while not [i for i in questions.pending() if i.deferred or not deferred]:  # noqa: ASYNC110
            await anyio.sleep(0.001)
