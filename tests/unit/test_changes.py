"""Recording file changes and undoing a turn's: all or nothing, never redirected."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jpd.conversation import events as ev
from jpd.tools.changes import ChangeRecorder, UndoRefused, plan_undo, turn_changes, undo
from jpd.tools.confine import Workspace


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Workspace, ChangeRecorder, list[ev.Event], Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("one\n")
    (ws / "b.txt").write_text("two\n")
    events: list[ev.Event] = [ev.TurnStart(turn_id="t1")]
    snapshots = tmp_path / "conv" / "snapshots"
    return Workspace.of(ws), ChangeRecorder(snapshots, events.append, "t1", "c1"), events, snapshots


def test_undo_restores_every_file_and_removes_created_ones(setup) -> None:  # type: ignore[no-untyped-def]
    w, rec, events, snapshots = setup
    a, b, new = w.resolve("a.txt"), w.resolve("b.txt"), w.resolve("d/new.txt")
    rec.write(w, a, b"one\n", b"ONE\n")
    rec.write(w, a, b"ONE\n", b"ONE!\n")  # twice in one turn: back to the first content
    rec.write(w, b, b"two\n", b"TWO\n")
    rec.write(w, new, None, b"new\n")
    plan = plan_undo(events, "t1")
    assert [(r.path.name, r.before is None) for r in plan] == [
        ("a.txt", False),
        ("b.txt", False),
        ("new.txt", True),
    ]
    done = undo(plan, snapshots, "t1")
    assert (a.read_text(), b.read_text(), new.exists()) == ("one\n", "two\n", False)
    # The folder made for the new file is removed with it.
    assert done.restored == [str(a), str(b)] and done.removed == [str(new), f"{new.parent}/"]
    assert not new.parent.exists()
    events.append(done)
    with pytest.raises(UndoRefused, match="undone already"):
        plan_undo(events, "t1")
    assert len(turn_changes(events, "t1")) == 3


def test_a_made_folder_that_is_not_empty_again_stays(setup) -> None:  # type: ignore[no-untyped-def]
    w, rec, events, snapshots = setup
    new = w.resolve("x/y/new.txt")
    rec.write(w, new, None, b"new\n")
    (new.parent.parent / "mine.txt").write_text("the user's\n")
    done = undo(plan_undo(events, "t1"), snapshots, "t1")
    assert done.removed == [str(new), f"{new.parent}/"]
    assert (new.parent.parent / "mine.txt").exists()


def test_a_file_changed_since_blocks_the_whole_undo(setup) -> None:  # type: ignore[no-untyped-def]
    w, rec, events, snapshots = setup
    a, b = w.resolve("a.txt"), w.resolve("b.txt")
    rec.write(w, a, b"one\n", b"ONE\n")
    rec.write(w, b, b"two\n", b"TWO\n")
    b.write_text("TWO and mine\n")
    with pytest.raises(UndoRefused, match=str(b)) as refused:
        undo(plan_undo(events, "t1"), snapshots, "t1")
    assert str(a) not in str(refused.value)
    assert (a.read_text(), b.read_text()) == ("ONE\n", "TWO and mine\n")  # nothing undone


def test_a_deleted_file_counts_as_changed(setup) -> None:  # type: ignore[no-untyped-def]
    w, rec, events, snapshots = setup
    a = w.resolve("a.txt")
    rec.write(w, a, b"one\n", b"ONE\n")
    a.unlink()
    with pytest.raises(UndoRefused, match="changed since"):
        undo(plan_undo(events, "t1"), snapshots, "t1")


def test_undo_is_not_redirected_by_a_folder_swapped_for_a_link(
    setup,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    w, rec, events, snapshots = setup
    (w.root / "sub").mkdir()
    target = w.resolve("sub/f.txt")
    rec.write(w, target, None, b"x\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "f.txt").write_text("x\n")  # same content the turn left
    os.rename(w.root / "sub", w.root / "sub-old")
    (w.root / "sub").symlink_to(elsewhere)
    with pytest.raises(UndoRefused):
        undo(plan_undo(events, "t1"), snapshots, "t1")
    assert (elsewhere / "f.txt").read_text() == "x\n"


def test_nothing_to_undo(setup) -> None:  # type: ignore[no-untyped-def]
    _, _, events, _ = setup
    with pytest.raises(UndoRefused, match="changed no files"):
        plan_undo(events, "t1")


def test_git_snapshots_are_inert_and_leave_the_repository_alone(tmp_path: Path) -> None:
    import subprocess

    from jpd.tools import git_snapshot as gs

    ws = tmp_path / "ws"
    ws.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=ws, env=env, check=True)
    (ws / "a.txt").write_text("a\n")
    (ws / ".gitattributes").write_text("* filter=evil\n")
    marker = tmp_path / "filter-ran"
    # A command in the sandbox may write the repository's config: its filter must not
    # run when the daemon (unsandboxed) snapshots the tree.
    subprocess.run(
        [*git, "config", "filter.evil.clean", f"touch {marker}; cat"], cwd=ws, env=env, check=True
    )
    repo = gs.repository(ws, env)
    assert repo is not None
    own = gs.private(repo, tmp_path / "scratch", env)
    before = gs.snapshot(own, env)
    (ws / "a.txt").write_text("b\n")
    after = gs.snapshot(own, env)
    assert gs.changed(own, before, after, env) == ["a.txt"]
    assert gs.content(own, before, "a.txt", env) == b"a\n"
    assert gs.content(own, before, "missing", env) is None
    assert not marker.exists()
    assert not (ws / ".git" / "index").exists()  # nothing written into the repository
    assert gs.repository(tmp_path / "scratch", env) is None
