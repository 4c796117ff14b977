"""Organising stored conversations (protocol.md 5.11, 5.26-5.27): listing them with
their attributes (filtered, sorted, limited), changing attributes (title, labels,
archived, pinned, expiry), forking, searching, and deleting the expired ones."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime, timedelta

import anyio

from jpd.conversation.attributes import Attributes
from jpd.conversation.events import Event
from jpd.conversation.metadata import ConversationMeta
from jpd.conversation.paths import new_conversation_id
from jpd.conversation.port import ConversationNotFound
from jpd.core.conversations import Conversations, check_id
from jpd.protocol.conversation_requests import (
    ConversationForkParams,
    ConversationForkResult,
    ConversationGrepParams,
    ConversationGrepResult,
    ConversationListParams,
    ConversationUpdateParams,
    GrepMatch,
)
from jpd.protocol.errors import InvalidParams, NotFound
from jpd.protocol.labels import check_label, check_title
from jpd.protocol.summaries import ConversationSummary

log = logging.getLogger(__name__)


def summary(meta: ConversationMeta, attributes: Attributes) -> ConversationSummary:
    return ConversationSummary(
        conversation_id=meta.id,
        title=attributes.title or meta.title or "",
        created_at=meta.created_at,
        updated_at=meta.updated_at,
        event_count=meta.event_count,
        workspace=meta.workspace,
        labels=list(attributes.labels),
        attachments=list(attributes.attachments),
        archived=attributes.archived_at is not None,
        pinned=attributes.pinned_at is not None,
        expires_at=attributes.expires_at,
    )


def _labels(labels: list[str]) -> list[str]:
    try:
        return [check_label(label) for label in labels]
    except ValueError as exc:
        raise InvalidParams(str(exc)) from None


def _listed(
    items: list[ConversationSummary], p: ConversationListParams
) -> list[ConversationSummary]:
    """`items` filtered, sorted (pinned first) and limited as `p` says."""
    if p.archived == "exclude":
        items = [c for c in items if not c.archived]
    elif p.archived == "only":
        items = [c for c in items if c.archived]
    wanted = set(_labels(p.labels))
    items = [c for c in items if wanted <= set(c.labels)]
    keys = {
        "updated": lambda c: (c.updated_at, c.conversation_id),
        "created": lambda c: (c.created_at, c.conversation_id),
        "title": lambda c: (c.title.casefold(), c.conversation_id),
        "events": lambda c: (c.event_count, c.conversation_id),
    }
    descending = p.descending if p.descending is not None else p.sort != "title"
    items = sorted(items, key=keys[p.sort], reverse=descending)
    items.sort(key=lambda c: not c.pinned)  # stable: pinned first, each part in order
    return items[: p.limit] if p.limit else items


class Organizer:
    """The requests that organise conversations, over the daemon's `Conversations`."""

    def __init__(self, conversations: Conversations) -> None:
        self._conversations = conversations
        self._store = conversations.store

    async def summaries(self) -> list[ConversationSummary]:
        """Every conversation with its attributes, newest first; expired ones deleted."""

        metas = await self._store.list()
        found = await self._store.all_attributes()
        pairs = [(meta, found.get(meta.id) or Attributes()) for meta in metas]
        now = datetime.now(UTC)
        kept: list[ConversationSummary] = []
        for meta, attributes in pairs:
            expired = attributes.expires_at is not None and attributes.expires_at <= now
            if expired and await self._expire(meta.id):
                continue
            kept.append(summary(meta, attributes))
        return kept

    async def list(self, p: ConversationListParams) -> list[ConversationSummary]:
        return _listed(await self.summaries(), p)

    async def _expire(self, conversation_id: str) -> bool:
        """Delete an expired conversation unless a turn runs in it (then later)."""
        try:
            await self._conversations.delete(conversation_id)
        except Exception as exc:  # busy or gone: listed (or not) as it is
            log.info("expired conversation %s not deleted now: %s", conversation_id, exc)
            return False
        log.info("deleted the expired conversation %s", conversation_id)
        return True

    async def sweep(self) -> None:
        """Delete every expired conversation (at start-up and each hour).

        Only the attributes say what expired: the start-up sweep runs beside the first
        turn, and listing every conversation's metadata (`summaries`) cost it a read
        per stored conversation."""
        found = await self._store.all_attributes()
        now = datetime.now(UTC)
        for conversation_id, attributes in sorted(found.items()):
            if attributes.expires_at is not None and attributes.expires_at <= now:
                await self._expire(conversation_id)

    async def _meta(self, conversation_id: str) -> ConversationMeta:
        check_id(conversation_id)
        try:
            return await self._store.metadata(conversation_id)
        except ConversationNotFound as exc:
            raise NotFound(str(exc)) from exc

    async def update(self, p: ConversationUpdateParams) -> ConversationSummary:
        """Change the attributes `p` names; others stay as they are."""
        meta = await self._meta(p.conversation_id)
        add, remove = _labels(p.add_labels), set(_labels(p.remove_labels))
        try:
            title = check_title(p.title) if p.title is not None else None
        except ValueError as exc:
            raise InvalidParams(str(exc)) from None
        now = datetime.now(UTC)

        def change(current: Attributes) -> Attributes:
            data = current.model_dump()
            if title is not None:
                data.update(title=title, title_source="user")
            labels = [label for label in current.labels if label not in remove]
            data["labels"] = labels + [label for label in dict.fromkeys(add) if label not in labels]
            if p.archived is not None:
                data["archived_at"] = (current.archived_at or now) if p.archived else None
            if p.pinned is not None:
                data["pinned_at"] = (current.pinned_at or now) if p.pinned else None
            gone = set(p.remove_attachments)
            kept = [a for a in current.attachments if a not in gone]
            data["attachments"] = kept + [a for a in p.add_attachments if a not in kept]
            if p.expires_in is not None:
                data["expires_at"] = now + timedelta(seconds=p.expires_in)
            return Attributes.model_validate(data)

        try:
            attributes = await self._store.update_attributes(meta.id, change)
        except ConversationNotFound as exc:  # deleted meanwhile
            raise NotFound(str(exc)) from exc
        return summary(meta, attributes)

    async def set_model_title(self, conversation_id: str, title: str) -> None:
        """A title the model wrote; never over one the user set."""

        def change(current: Attributes) -> Attributes:
            if current.title_source == "user":
                return current
            return current.model_copy(update={"title": check_title(title), "title_source": "model"})

        await self._store.update_attributes(conversation_id, change)

    async def fork(self, p: ConversationForkParams) -> ConversationForkResult:
        """A new conversation with a copy of the source's chosen turns and its labels."""
        from jpd.conversation.fork import select_turns, write_fork

        await self._meta(p.conversation_id)
        labels = _labels(p.labels)
        await self._conversations.recover(p.conversation_id)
        source = p.conversation_id
        target = new_conversation_id()

        async def run() -> int:
            events = await self._store.load(source)
            kept, turns = select_turns(
                events, first=p.first, last=p.last, from_time=p.from_time, until=p.until
            )
            await write_fork(self._store, source, target, kept)
            inherited = await self._store.attributes(source)

            def change(current: Attributes) -> Attributes:
                merged = list(dict.fromkeys([*inherited.labels, *labels]))
                title = check_title(p.title) if p.title else None
                return Attributes(
                    labels=merged, title=title, title_source="user" if title else None
                )

            await self._store.update_attributes(target, change)
            return turns

        try:
            turns = await run()
        except ConversationNotFound as exc:
            raise NotFound(str(exc)) from exc
        except ValueError as exc:
            raise InvalidParams(str(exc)) from None
        return ConversationForkResult(conversation_id=target, turns=turns)

    async def grep(self, p: ConversationGrepParams) -> ConversationGrepResult:
        """Every matching message line of the conversations `p` selects, newest first."""
        from jpd.conversation.grep import grep

        try:
            pattern = re.compile(p.pattern, re.IGNORECASE if p.ignore_case else 0)
        except re.error as exc:
            raise InvalidParams(f"invalid pattern {p.pattern!r}: {exc}") from None
        if p.conversation_id is not None:
            await self._meta(p.conversation_id)
            ids = [p.conversation_id]
        else:
            listing = ConversationListParams(
                archived="include" if p.archived else "exclude", labels=p.labels
            )
            ids = [c.conversation_id for c in await self.list(listing)]

        def search(conversation_id: str, events: list[Event], found: list[GrepMatch]) -> bool:
            """Add the matches of one conversation; True once the limit is passed."""
            for hit in grep(events, pattern, p.context):
                if len(found) == p.limit:
                    return True
                found.append(
                    GrepMatch(
                        conversation_id=conversation_id,
                        event=hit.event,
                        role=hit.role,
                        line_number=hit.line_number,
                        line=hit.line,
                        before=hit.before,
                        after=hit.after,
                    )
                )
            return False

        matches: list[GrepMatch] = []
        truncated = False
        for conversation_id in ids:
            try:
                events = await self._store.load(conversation_id)
            except ConversationNotFound:
                continue  # deleted meanwhile
            # The regex over a long log: off the event loop, as its read was.
            if await anyio.to_thread.run_sync(search, conversation_id, events, matches):
                truncated = True
                break
        return ConversationGrepResult(matches=matches, truncated=truncated)
