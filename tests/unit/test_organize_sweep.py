"""The sweep of expired conversations (`Organizer.sweep`, at start-up and each hour):
it deletes what expired, keeps the rest and a conversation whose turn runs, and reads
only the attributes (not every conversation's metadata)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from jpd.conversation.attributes import Attributes
from jpd.conversation.events import ChatRequest
from jpd.conversation.jsonl.threaded import ThreadedStore
from jpd.conversation.replay import ReplayFiles
from jpd.core.conversations import Conversations
from jpd.core.hub import EventHub
from jpd.core.organize import Organizer


def _expiring(at: datetime) -> Callable[[Attributes], Attributes]:
    def change(attributes: Attributes) -> Attributes:
        return attributes.model_copy(update={"expires_at": at})

    return change


def test_sweep_deletes_what_expired_and_keeps_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ThreadedStore(tmp_path)
    hub = EventHub(ReplayFiles(tmp_path / "replay"))
    running = {"c-busy"}
    conversations = Conversations(store, hub, lambda cid: cid in running)
    organizer = Organizer(conversations)
    now = datetime.now(UTC)

    async def scenario() -> list[str]:
        for cid in ("c-old", "c-later", "c-plain", "c-busy"):
            await store.create(cid)
            store.append(cid, ChatRequest(content="hi"))
        await store.update_attributes("c-old", _expiring(now - timedelta(minutes=1)))
        await store.update_attributes("c-busy", _expiring(now - timedelta(minutes=1)))
        await store.update_attributes("c-later", _expiring(now + timedelta(hours=1)))

        def no_listing() -> None:
            raise AssertionError("the sweep listed every conversation")

        monkeypatch.setattr(store, "list", no_listing)
        await organizer.sweep()
        monkeypatch.undo()
        kept = sorted(meta.id for meta in await store.list())
        await store.close()
        return kept

    assert anyio.run(scenario) == ["c-busy", "c-later", "c-plain"]
