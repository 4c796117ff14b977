"""A conversation's blobs (file snapshots, prompt images) written on one member are read
on another; a stored path that would leave the conversation's directory is ignored."""

from __future__ import annotations

from pathlib import Path

import psycopg

from jpd.conversation.pg import PgStore

CID = "c-blobs"


async def test_blobs_written_on_one_member_are_fetched_on_another(
    pg_url: str, tmp_path: Path
) -> None:
    a = PgStore(pg_url, tmp_path / "a", host="a")
    b = PgStore(pg_url, tmp_path / "b", host="b")
    try:
        await a.create(CID)
        here = a.conversation_dir(CID)
        (here / "snapshots").mkdir(parents=True)
        (here / "snapshots" / "ab12").write_bytes(b"old content\x00\xff")
        (here / "image-1.png").write_bytes(b"\x89PNG...")
        (here / "snapshots" / ".ab12.tmp").write_bytes(b"half written")
        await a.share_blobs(CID)
        await a.share_blobs(CID)  # once stored, not again

        await b.fetch_blobs(CID)
        there = b.conversation_dir(CID)
        assert (there / "snapshots" / "ab12").read_bytes() == b"old content\x00\xff"
        assert (there / "image-1.png").read_bytes() == b"\x89PNG..."
        assert not (there / "snapshots" / ".ab12.tmp").exists()
        assert (there / "snapshots" / "ab12").stat().st_mode & 0o777 == 0o600

        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            count = await (await conn.execute("SELECT count(*) FROM jpd_blobs")).fetchone()
            assert count == (2,)
            for name in ("../escape", "/etc/escape", "snapshots/../../escape"):
                await conn.execute(
                    "INSERT INTO jpd_blobs (conversation_id, path, data) VALUES (%s, %s, %s)",
                    (CID, name, b"x"),
                )
        await b.fetch_blobs(CID)
        assert not (tmp_path / "b" / "conversations" / "escape").exists()
        assert not (tmp_path / "b" / "escape").exists()
        assert sorted(p.name for p in there.rglob("*") if p.is_file()) == ["ab12", "image-1.png"]
    finally:
        await a.close()
        await b.close()
