"""Questions offered to the clients attached on any fleet member (docs/scale.md,
protocol.md 10.3): a turn's question reaches its conversation's clients wherever they
are connected, as if the turn ran on their member.

On the member whose turn asks, the clients able to answer that other members have
subscribed to the conversation are links like its own (`RemoteClient`), read from the
store when a question is first offered and every quarter second while questions wait
(`FleetQuestions`, `PendingQuestions` with them among the subscribers). So the first
valid answer wins, an invalid one is asked again with `previousError`, -32800 cancels
the question, and the detached policy applies only when no member has a client that
can answer. A remote client's requests are relayed through the store
(`port.QuestionBoard.relay`): its member sends them and stores the reply.

On the member of such a client (`RemotePrompts` too): its capable clients'
subscriptions to conversations it follows are recorded (`watch`: when they change,
renewed every two seconds); the requests relayed to them are sent and their replies
stored; an `inquiry/resolved` relayed is delivered, and the request still open for it
at that client abandoned (as a member abandons its own clients' requests).
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from jpd.conversation.port import QuestionBoard
from jpd.core.hub import EventHub
from jpd.inquiry.pending import PendingQuestions, Reply, Request
from jpd.protocol.client_port import ClientCapabilities, ClientLink, Notification
from jpd.protocol.errors import ConnectionLost, InvalidClientResult, RequestCancelled
from jpd.protocol.method_table import INQUIRY_RESOLVED, TABLE, ServerRequest
from jpd.protocol.server_requests import InquiryResolvedParams

log = logging.getLogger(__name__)

INTERVAL = 0.25
HEARTBEAT = 2.0
LINGER = 10.0
"""Seconds a member still reads what is relayed to it after its last capable client
left (an `inquiry/resolved` on its way)."""
_ids = itertools.count(-2_000_000, -1)  # below real clients', relays' and turns' ids


class RemoteClient:
    """A capable client subscribed to `conversation_id` on another member (`member`,
    where its id is `remote_id`), as a link of this member."""

    def __init__(
        self,
        relay: RemotePrompts,
        conversation_id: str,
        member: str,
        remote_id: int,
        capabilities: ClientCapabilities,
    ) -> None:
        self._relay = relay
        self.conversation_id = conversation_id
        self.member = member
        self.remote_id = remote_id
        self._capabilities = capabilities
        self._id = next(_ids)
        self._asked: set[str] = set()
        self.gone = False

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
        return False

    def notify(self, method: Any, params: Any) -> None:
        """Only `inquiry/resolved` of what it was asked goes to it (turn events reach
        its member through the turn stream)."""
        if method is not INQUIRY_RESOLVED or not isinstance(params, InquiryResolvedParams):
            return
        if params.conversation_id != self.conversation_id or params.inquiry_id not in self._asked:
            return
        self._asked.discard(params.inquiry_id)
        if params.answered_by == f"client-{self._id}":  # named as its own member knows it
            params = params.model_copy(update={"answered_by": f"client-{self.remote_id}"})
        self._relay.post(self, INQUIRY_RESOLVED.name, params.model_dump(mode="json"))

    def send(self, notification: Notification) -> None:
        """Turn events reach its member through the turn stream."""

    async def request(self, method: Any, params: Any) -> Any:
        if self.gone:
            raise ConnectionLost("the client left its member")
        self._asked.add(str(getattr(params, "inquiry_id", "")))
        # By field name: the question's own fields are snake_case but for the wire.
        body = params.model_dump(mode="json", exclude_none=True)
        reply = await self._relay.ask(self, method.name, body)
        if "result" in reply:
            assert isinstance(method, ServerRequest)
            return method.read_result(reply["result"])
        error = reply.get("error") or {}
        message = str(error.get("message", "no answer"))
        if error.get("kind") == "cancelled":
            raise RequestCancelled(message)
        if error.get("kind") == "invalid":
            raise InvalidClientResult(message)
        raise ConnectionLost(message)


@dataclass
class _Open:
    """A request relayed to a remote client, awaiting its reply."""

    client: RemoteClient
    done: anyio.Event = field(default_factory=anyio.Event)
    reply: dict[str, Any] | None = None


class RemotePrompts:
    """Both sides of relaying questions between members; see the module docstring."""

    def __init__(
        self,
        board: QuestionBoard,
        hub: EventHub,
        links: Callable[[], Mapping[int, ClientLink]],
    ) -> None:
        self._board = board
        self._hub = hub
        self._links = links
        self.questions: PendingQuestions | None = None
        self.followed: Callable[[], list[str]] = list
        """The conversations this member's clients follow (`Followers.followed`)."""
        # The asking side.
        self._remote: dict[str, dict[tuple[str, int], RemoteClient]] = {}
        self._open: dict[int, _Open] = {}
        self._dropped: list[int] = []
        self._outbox: list[tuple[RemoteClient, str, dict[str, Any]]] = []
        # The side of the clients.
        self._published: list[tuple[str, int, str]] = []
        self._published_at = 0.0
        self._active_until = 0.0
        self._watching = anyio.Lock()
        self._seen: set[int] = set()
        self._forwarding: dict[int, tuple[tuple[int, str, str], anyio.CancelScope]] = {}
        self._tg: TaskGroup | None = None

    # --- the asking side -------------------------------------------------------------

    def links(self, conversation_id: str) -> list[ClientLink]:
        """The remote clients subscribed to the conversation, as last read."""
        return list(self._remote.get(conversation_id, {}).values())

    def all_links(self) -> list[ClientLink]:
        return [c for clients in self._remote.values() for c in clients.values()]

    async def refresh_now(self, conversation_id: str) -> None:
        """Read who can answer in the conversation on the other members, now (a
        question is about to be offered); on failure, what was read last stands."""
        try:
            await self._refresh([conversation_id])
        except Exception as exc:
            log.warning("could not read the clients of other members: %s", exc)

    async def _refresh(self, conversation_ids: list[str]) -> None:
        rows = await self._board.watchers(conversation_ids)
        found: dict[str, dict[tuple[str, int], str]] = {c: {} for c in conversation_ids}
        for cid, member, link_id, caps in rows:
            found.setdefault(cid, {})[(member, link_id)] = caps
        for cid, now in found.items():
            known = self._remote.setdefault(cid, {})
            for key in [k for k in known if k not in now]:
                self._leave(known.pop(key))
            for key, caps in now.items():
                if key in known:
                    continue
                try:
                    capabilities = ClientCapabilities.model_validate_json(caps)
                except ValueError:
                    continue  # written by a newer jpd
                client = known[key] = RemoteClient(self, cid, key[0], key[1], capabilities)
                if self.questions is not None:  # as a client that attached: offered now
                    self.questions.client_ready(client, cid)
            if not known:
                del self._remote[cid]

    def _leave(self, client: RemoteClient) -> None:
        """The client left (or its member stopped): its open requests fail."""
        client.gone = True
        for waiting in self._open.values():
            if waiting.client is client:
                waiting.done.set()

    async def ask(
        self, client: RemoteClient, method: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        """Relay a request to `client` and await its reply (its error, as a dict)."""
        body = json.dumps(params, separators=(",", ":"))
        with anyio.CancelScope(shield=True):  # its id kept, so that the row is dropped
            relayed = await self._board.relay(client.member, client.remote_id, method, body)
        waiting = self._open[relayed] = _Open(client)
        try:
            if not client.gone:  # it may have left while the row was written
                await waiting.done.wait()
        finally:  # answered, abandoned (resolved otherwise) or gone: the row goes
            self._open.pop(relayed, None)
            self._dropped.append(relayed)
        if waiting.reply is None:
            return {"error": {"kind": "gone", "message": "the client left its member"}}
        return waiting.reply

    def post(self, client: RemoteClient, method: str, params: dict[str, Any]) -> None:
        """Relay a notification to `client` (at the next round)."""
        self._outbox.append((client, method, params))

    async def _asking_round(self) -> None:
        while self._outbox:  # each kept until relayed: the store may be away
            client, method, params = self._outbox[0]
            body = json.dumps(params, separators=(",", ":"))
            await self._board.relay(client.member, client.remote_id, method, body)
            self._outbox.pop(0)
        dropped = list(self._dropped)
        if dropped:
            await self._board.drop(dropped)
            del self._dropped[: len(dropped)]
        if self._open:
            replies = await self._board.replies(list(self._open))
            for relayed, body in replies.items():
                waiting = self._open.get(relayed)
                if waiting is not None:
                    waiting.reply = json.loads(body)
                    waiting.done.set()
        asked = {i.conversation_id for i in self.questions.pending()} if self.questions else set()
        for cid in [c for c in self._remote if c not in asked]:  # nothing asked there now
            for client in self._remote.pop(cid).values():
                self._leave(client)
        if asked:  # clients that attached or left meanwhile
            await self._refresh(sorted(asked))

    # --- the side of the clients -----------------------------------------------------

    def _watched(self) -> list[tuple[str, int, str]]:
        rows = []
        for cid in self.followed():
            for link in self._hub.subscribers(cid):
                caps = link.capabilities
                if link.link_id > 0 and (caps.prompt_answer_types or caps.permission):
                    rows.append((cid, link.link_id, caps.model_dump_json()))
        return sorted(rows)

    async def watch_now(self) -> None:
        """Record this member's capable clients by conversation if they changed (or to
        renew them): a question asked now on another member is offered to them."""
        try:
            async with self._watching:
                rows = self._watched()
                fresh = time.monotonic() - self._published_at < HEARTBEAT
                if rows == self._published and (fresh or not rows):
                    return
                await self._board.watch(rows)
                self._published, self._published_at = rows, time.monotonic()
                if rows:
                    self._active_until = time.monotonic() + HEARTBEAT + LINGER
        except Exception as exc:  # the store is away: the next round tries again
            log.warning("could not record the clients of this member: %s", exc)

    async def _clients_round(self) -> None:
        await self.watch_now()
        if not self._forwarding and time.monotonic() > self._active_until:
            return
        rows = await self._board.relayed()
        self._seen &= {row[0] for row in rows}
        for relayed, link_id, method, params in rows:
            if relayed not in self._seen:
                self._seen.add(relayed)
                await self._deliver(relayed, link_id, method, params)

    async def _deliver(self, relayed: int, link_id: int, method: str, params: str) -> None:
        link = self._links().get(link_id)
        entry = TABLE.get(method)
        if method == INQUIRY_RESOLVED.name:
            resolved = InquiryResolvedParams.model_validate_json(params)
            key = (link_id, resolved.conversation_id, resolved.inquiry_id)
            for known, scope in list(self._forwarding.values()):
                if known == key:  # answered or ended: its prompt is abandoned here
                    scope.cancel()
            if link is not None:
                link.notify(INQUIRY_RESOLVED, resolved)
            await self._board.reply(relayed, None)
            return
        if link is None or not isinstance(entry, ServerRequest) or self._tg is None:
            gone = {"error": {"kind": "gone", "message": "the client is no longer connected"}}
            await self._board.reply(relayed, json.dumps(gone))
            return
        try:
            request = entry.params.model_validate_json(params)
        except ValueError as exc:  # sent by a newer jpd
            failed = {"error": {"kind": "failed", "message": str(exc)}}
            await self._board.reply(relayed, json.dumps(failed))
            return
        cid = str(request.conversation_id)
        if all(s.link_id != link_id for s in self._hub.subscribers(cid)):
            gone = {"error": {"kind": "gone", "message": "the client detached"}}
            await self._board.reply(relayed, json.dumps(gone))
            return
        key = (link_id, cid, str(request.inquiry_id))
        self._tg.start_soon(self._forward, relayed, link, entry, request, key)

    async def _forward(
        self,
        relayed: int,
        link: ClientLink,
        method: ServerRequest[Any, Any],
        params: Any,
        key: tuple[int, str, str],
    ) -> None:
        reply: dict[str, Any]
        with anyio.CancelScope() as scope:
            self._forwarding[relayed] = (key, scope)
            try:
                result = await link.request(method, params)
                reply = {"result": result.to_wire()}
            except RequestCancelled as exc:
                reply = {"error": {"kind": "cancelled", "message": exc.message}}
            except InvalidClientResult as exc:
                reply = {"error": {"kind": "invalid", "message": exc.message}}
            except Exception as exc:
                reply = {"error": {"kind": "failed", "message": str(exc)}}
        self._forwarding.pop(relayed, None)
        if scope.cancelled_caught:
            return  # abandoned: the asking member dropped it
        try:
            await self._board.reply(relayed, json.dumps(reply))
        except Exception as exc:  # the asker's wait goes on; its client may answer again
            log.warning("could not store a client's reply: %s", exc)

    # --- both --------------------------------------------------------------------------

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            while True:
                await anyio.sleep(INTERVAL)
                for one in (self._asking_round, self._clients_round):
                    try:
                        await one()
                    except Exception as exc:  # the store is away: the next round again
                        log.warning("could not relay questions: %s", exc)


class FleetQuestions(PendingQuestions):
    """`PendingQuestions` whose subscribers include the capable clients of the other
    members (`RemotePrompts`), read anew when a question is first offered."""

    def __init__(
        self,
        subscribers: Callable[[str], list[ClientLink]],
        everyone: Callable[[], list[ClientLink]],
        relay: RemotePrompts,
    ) -> None:
        super().__init__(
            lambda cid: [*subscribers(cid), *relay.links(cid)],
            lambda: [*everyone(), *relay.all_links()],
        )
        self._relay = relay
        relay.questions = self

    async def ask(self, request: Request, *, wait: bool, wait_limit: float | None) -> Reply | None:
        if not wait:  # who can answer it now, on every member
            await self._relay.refresh_now(request.info.conversation_id)
        return await super().ask(request, wait=wait, wait_limit=wait_limit)
