"""A conversation's attributes (title, labels, archive, pin, kept attachments) are the
fleet's, not one member's: set through `jp` on one member, seen and changed through
`jp` on another (they live in `jpd_attributes`)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.sockets import Daemons
from tests.e2e.test_jp_daily import jp_in
from tests.fleet.test_takeover import member


async def test_attributes_set_on_one_member_are_seen_on_another(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    env_a = member(tmp_path / "a", pg_url, [{"text": "ok"}] * 3)
    env_b = member(tmp_path / "b", pg_url, [{"text": "ok"}] * 3)
    await daemons.start(env_a)
    await daemons.start(env_b)
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    (work / "notes.md").write_text("shared notes\n")
    ran = jp_in(env_a, work, "query", "--new", "-l", "work", "--title", "Release plan", "hi")
    assert ran.returncode == 0, ran.stderr

    listed = jp_in(env_b, work, "conversation", "ls", "--label", "work")
    assert listed.returncode == 0, listed.stderr
    [row] = listed.stdout.splitlines()[1:]
    assert "Release plan" in row
    cid = row.split()[0].lstrip("*")

    assert jp_in(env_b, work, "conversation", "pin", cid).returncode == 0
    labelled = jp_in(env_b, work, "conversation", "label", "add", "-c", cid, "urgent")
    assert labelled.returncode == 0, labelled.stderr
    kept = jp_in(env_b, work, "attachment", "add", "-c", cid, "notes.md")
    assert kept.returncode == 0, kept.stderr
    assert jp_in(env_a, work, "attachment", "ls").stdout == "notes.md\n"
    shown = jp_in(env_a, work, "conversation", "ls", "--label", "urgent")
    assert cid in shown.stdout and "Release plan" in shown.stdout
    assert jp_in(env_a, work, "conversation", "archive", cid).returncode == 0
    hidden = jp_in(env_b, work, "conversation", "ls")
    assert cid not in hidden.stdout
    assert cid in jp_in(env_b, work, "conversation", "ls", "--archived").stdout
    for home in (tmp_path / "a", tmp_path / "b"):
        assert not list((home / "data").rglob("attributes.json"))
