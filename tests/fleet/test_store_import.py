"""`jpd store import` copies a data dir's JSONL conversations into Postgres: the same
events and summaries, once (a second run skips what is there)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from jpd.conversation import events as ev
from jpd.conversation.jsonl.store import ConversationStore
from jpd.conversation.pg import PgStore

ROOT = Path(__file__).resolve().parents[2]


def jpd_store(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "JPD_STORE_URL"}
    env.update(JP_DATA_DIR=str(data), JP_CONFIG=str(data / "none.toml"))
    return subprocess.run(
        [sys.executable, "-m", "jpd", "store", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_import_copies_each_conversation_once(tmp_path: Path, pg_url: str) -> None:
    data = tmp_path / "data"
    with ConversationStore(data) as local:
        for n in range(3):
            cid = f"c-{n}"
            local.create(cid)
            local.append(cid, ev.TurnStart(turn_id=f"t-{n}", model="m/x", workspace=f"/w{n}"))
            local.append(cid, ev.ChatRequest(content=f"question {n}"))
            local.append(cid, ev.ChatResponse(message=f"answer {n}"))
            if n != 2:  # c-2's turn was left open by a crash: copied as it is
                local.append(cid, ev.TurnEnd(turn_id=f"t-{n}", stop_reason="end_turn"))
        local.update_attributes("c-1", lambda a: a.model_copy(update={"labels": ["work"]}))
        expected = {m.id: (m, local.load(m.id, sanitized=False)) for m in local.list()}

    first = jpd_store(data, "import", "--url", pg_url)
    assert first.returncode == 0, first.stderr
    assert "imported 3 conversations (11 events); 0 already in the store" in first.stdout
    again = jpd_store(data, "import", "--url", pg_url)
    assert "imported 0 conversations (0 events); 3 already in the store" in again.stdout

    store = PgStore(pg_url, data, host="check")
    try:
        assert [m.id for m in await store.list()] == [m.id for m, _ in expected.values()]
        for cid, (meta, events) in expected.items():
            got = await store.metadata(cid)
            # Dated by its first event, as a summary rebuilt from the log is.
            assert got.created_at == events[0].timestamp
            assert got.model_dump(exclude={"created_at"}) == meta.model_dump(exclude={"created_at"})
            assert await store.load(cid, sanitized=False) == events
        assert await store.last_turn("c-2") == (True, None)
        assert (await store.attributes("c-1")).labels == ["work"]  # the attributes came along
        assert set(await store.all_attributes()) == {"c-1"}
    finally:
        await store.close()


def test_import_without_a_store_says_how_to_name_one(tmp_path: Path) -> None:
    result = jpd_store(tmp_path, "import")
    assert result.returncode == 2
    assert "no store configured" in result.stderr
