"""Both stores behind `port.ConversationStorage` behave alike: the JSONL files (the
embedded default, through `ThreadedStore`) and Postgres (a real server, see
conftest.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
import pytest_asyncio

from jpd.conversation import events as ev
from jpd.conversation.jsonl.threaded import ThreadedStore
from jpd.conversation.port import ConversationExists, ConversationNotFound, ConversationStorage
from jpd.conversation.recovery import INTERRUPTED_TOOL, recover_all

CID = "c-port"


@pytest_asyncio.fixture(params=["jsonl", "postgres"])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[ConversationStorage]:
    if request.param == "jsonl":
        s: ConversationStorage = ThreadedStore(tmp_path)
    else:
        from jpd.conversation.pg import PgStore

        url = request.getfixturevalue("pg_url")
        s = PgStore(url, tmp_path, host="test", lease_ttl=5)
    await s.open()
    yield s
    await s.close()


def turn(cid: str = CID, turn_id: str = "t-1") -> list[ev.Event]:
    return [
        ev.TurnStart(turn_id=turn_id, model="m/x", workspace="/w"),
        ev.ChatRequest(content="Hello there\nsecond line"),
        ev.ChatResponse(message="hi"),
        ev.TurnEnd(turn_id=turn_id, stop_reason="end_turn"),
    ]


async def test_create_append_load_and_summary(store: ConversationStorage) -> None:
    await store.create(CID)
    assert await store.exists(CID)
    with pytest.raises(ConversationExists):
        await store.create(CID)
    for event in turn():
        store.append(CID, event)
    await store.sync(CID)
    loaded = await store.load(CID)
    assert [type(e) for e in loaded] == [type(e) for e in turn()]
    assert loaded[1] == turn()[1].model_copy(update={"timestamp": loaded[1].timestamp})
    meta = await store.metadata(CID)
    assert (meta.title, meta.event_count, meta.workspace) == ("Hello there", 4, "/w")
    assert [m.id for m in await store.list()] == [CID]
    assert [e["type"] for e in json.loads(await store.load_encoded(CID))] == [
        "turn_start",
        "chat_request",
        "chat_response",
        "turn_end",
    ]


async def test_missing_conversations_are_reported(store: ConversationStorage) -> None:
    assert not await store.exists("c-none")
    for call in (
        lambda: store.load("c-none"),
        lambda: store.metadata("c-none"),
        lambda: store.delete("c-none"),
        lambda: store.lock_turn("c-none"),
    ):
        with pytest.raises(ConversationNotFound):
            await call()
    assert await store.last_turn("c-none") == (False, None)


async def test_delete_removes_the_log(store: ConversationStorage) -> None:
    await store.create(CID)
    store.append(CID, ev.ChatRequest(content="x"))
    await store.delete(CID)
    assert not await store.exists(CID)
    assert await store.list() == []


async def test_concurrent_appends_keep_every_event_once_in_order_per_writer(
    store: ConversationStorage,
) -> None:
    await store.create(CID)

    async def write(who: int) -> None:
        for n in range(25):
            store.append(CID, ev.ChatRequest(content=f"{who}:{n}"))
            await anyio.lowlevel.checkpoint()  # the writers interleave

    async with anyio.create_task_group() as tg:
        for w in range(4):
            tg.start_soon(write, w)
    contents = [e.content for e in await store.load(CID) if isinstance(e, ev.ChatRequest)]
    assert sorted(contents) == sorted(f"{w}:{n}" for w in range(4) for n in range(25))
    for w in range(4):
        mine = [c for c in contents if c.startswith(f"{w}:")]
        assert mine == [f"{w}:{n}" for n in range(25)]


async def test_appends_from_worker_threads_are_kept_in_order(store: ConversationStorage) -> None:
    """A tool records its file changes from its worker thread (the loop idle meanwhile,
    no append queued before): each is kept, in the thread's order."""
    await store.create(CID)

    def tool(who: int) -> None:
        for n in range(10):
            store.append(CID, ev.ChatRequest(content=f"{who}:{n}"))

    async with anyio.create_task_group() as tg:
        for w in range(3):
            tg.start_soon(anyio.to_thread.run_sync, tool, w)
    await store.sync(CID)
    contents = [e.content for e in await store.load(CID) if isinstance(e, ev.ChatRequest)]
    for w in range(3):
        assert [c for c in contents if c.startswith(f"{w}:")] == [f"{w}:{n}" for n in range(10)]
    assert len(contents) == 30


async def test_one_turn_lease_at_a_time(store: ConversationStorage) -> None:
    await store.create(CID)
    lease = await store.lock_turn(CID)
    assert lease is not None
    if isinstance(store, ThreadedStore):
        other: ConversationStorage = ThreadedStore(store.root)
    else:
        from jpd.conversation.pg import PgStore

        assert isinstance(store, PgStore)
        other = PgStore(store.url, store.root, host="other", lease_ttl=5)
    try:
        assert await other.lock_turn(CID) is None
        await lease.release()
        again = await other.lock_turn(CID)
        assert again is not None
        await again.release()
    finally:
        await other.close()


async def test_the_last_turn_and_the_recovery_scan(store: ConversationStorage) -> None:
    await store.create(CID)
    assert await store.last_turn(CID) == (False, None)
    start = ev.TurnStart(turn_id="t-1", model="m/x")
    store.append(CID, start)
    store.append(CID, ev.ChatRequest(content="run it"))
    store.append(CID, ev.ToolCallRequest(id="call-1", name="run_command", arguments={}))
    await store.sync(CID)  # a fleet's appends: committed
    assert await store.last_turn(CID) == (True, None)
    assert [(c, o) for c, o, _ in await store.scan_turns()] == [(CID, True)]
    await store.create("c-done")
    for event in turn("c-done"):
        store.append("c-done", event)
    await store.sync("c-done")

    found = await recover_all(store)  # the open turn: closed as interrupted, and resumable

    assert list(found) == [CID]
    assert found[CID].turn_id == "t-1"
    is_open, resumable = await store.last_turn(CID)
    assert not is_open and resumable is not None and resumable.turn_id == "t-1"
    tail = (await store.load(CID, sanitized=False))[-2:]
    assert isinstance(tail[0], ev.ToolCallResponse) and tail[0].content == INTERRUPTED_TOOL
    assert isinstance(tail[1], ev.TurnEnd) and tail[1].stop_reason == "interrupted"
    assert await recover_all(store) == found  # nothing appended twice
    assert len(await store.load(CID, sanitized=False)) == 5

    store.append(CID, ev.TurnResume(turn_id="t-1"))
    await store.sync(CID)
    assert await store.last_turn(CID) == (True, None)
    store.append(CID, ev.TurnEnd(turn_id="t-1", stop_reason="end_turn"))
    await store.sync(CID)
    assert await store.last_turn(CID) == (False, None)


async def test_attributes_change_atomically_and_go_with_the_conversation(
    store: ConversationStorage,
) -> None:
    from jpd.conversation.attributes import Attributes

    assert await store.attributes(CID) == Attributes() and await store.all_attributes() == {}
    with pytest.raises(ConversationNotFound):
        await store.update_attributes(CID, lambda a: a.model_copy(update={"title": "x"}))
    await store.create(CID)
    titled = await store.update_attributes(
        CID, lambda a: a.model_copy(update={"title": "Plan", "title_source": "user"})
    )
    assert titled.title == "Plan" and await store.attributes(CID) == titled

    async def add(n: int) -> None:
        for i in range(10):
            label = f"l{n}-{i}"
            await store.update_attributes(
                CID, lambda a, label=label: a.model_copy(update={"labels": [*a.labels, label]})
            )

    async with anyio.create_task_group() as tg:  # at once: threads, or pooled connections
        for n in range(4):
            tg.start_soon(add, n)
    labels = (await store.attributes(CID)).labels
    assert len(labels) == 40 and len(set(labels)) == 40  # no change lost
    assert await store.all_attributes() == {CID: await store.attributes(CID)}
    await store.delete(CID)
    assert await store.all_attributes() == {}
    assert await store.attributes(CID) == Attributes()


async def test_members_see_each_others_attributes(tmp_path: Path, pg_url: str) -> None:
    from jpd.conversation.pg import PgStore

    one = PgStore(pg_url, tmp_path / "one", host="one", lease_ttl=5)
    two = PgStore(pg_url, tmp_path / "two", host="two", lease_ttl=5)
    try:
        await one.create(CID)
        await one.update_attributes(CID, lambda a: a.model_copy(update={"labels": ["shared"]}))
        await two.update_attributes(
            CID, lambda a: a.model_copy(update={"labels": [*a.labels, "too"]})
        )
        assert (await one.attributes(CID)).labels == ["shared", "too"]
        assert not (tmp_path / "one" / "conversations" / CID / "attributes.json").exists()
    finally:
        await one.close()
        await two.close()
