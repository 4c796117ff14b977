"""Forking a conversation (`conversation/fork`, protocol.md 5.27): which turns of the
source a fork carries, and writing them as the log of a new conversation.

A turn is the run of events from one `turn_start` to the next. The fork is independent
of its source: its own log, its own copies of the images its messages show. What it
leaves out of the source: a turn still running (no `turn_end` yet), and, unless it keeps
the source's first turns, the source's compactions (their positions count the source's events;
the fork is compacted afresh when it needs to be) and the files of undo (`snapshots`:
undoing a turn of the source in the fork would be surprising).
"""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path, PurePosixPath

import anyio

from jpd.conversation import events as ev
from jpd.conversation.port import ConversationStorage


def split_turns(events: list[ev.Event]) -> tuple[list[ev.Event], list[list[ev.Event]]]:
    """The events before the first turn, and each turn's events."""
    head: list[ev.Event] = []
    turns: list[list[ev.Event]] = []
    for event in events:
        if isinstance(event, ev.TurnStart):
            turns.append([event])
        elif turns:
            turns[-1].append(event)
        else:
            head.append(event)
    return head, turns


def select_turns(
    events: list[ev.Event],
    *,
    first: int | None = None,
    last: int | None = None,
    from_time: datetime | None = None,
    until: datetime | None = None,
) -> tuple[list[ev.Event], int]:
    """The events a fork carries, and how many turns: the finished turns started in
    `[from_time, until)`, then the first `first` and/or last `last` of them (neither:
    all)."""
    head, turns = split_turns(events)
    done = [t for t in turns if any(isinstance(e, ev.TurnEnd) for e in t)]
    if from_time is not None:
        done = [t for t in done if t[0].timestamp >= from_time]
    if until is not None:
        done = [t for t in done if t[0].timestamp < until]
    if first is not None or last is not None:
        keep = set(range(min(first or 0, len(done))))
        keep |= set(range(max(0, len(done) - (last or 0)), len(done)))
        chosen = [t for index, t in enumerate(done) if index in keep]
    else:
        chosen = done
    kept = head + [event for turn in chosen for event in turn]
    if chosen != turns[: len(chosen)]:  # positions count the source's events: a prefix only
        kept = [e for e in kept if not isinstance(e, ev.ContextCompacted)]
    return kept, len(chosen)


def image_files(events: list[ev.Event]) -> set[str]:
    """The files (relative to the conversation's folder) the events' images are in."""
    files: set[str] = set()
    for event in events:
        if isinstance(event, ev.ChatRequest):
            files.update(image.file for image in event.images or ())
    return files


def copy_images(names: set[str], source_dir: Path, target_dir: Path) -> None:
    """Copy the image files `names` (relative) from `source_dir` to `target_dir`, never
    one from outside it. Blocking: call it in a worker thread."""
    for name in sorted(names):
        relative = PurePosixPath(name)
        if relative.is_absolute() or ".." in relative.parts:
            continue  # never copy from outside the source's folder
        origin = source_dir / Path(*relative.parts)
        if origin.is_file() and not origin.is_symlink():
            destination = target_dir / Path(*relative.parts)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(origin, destination)


async def write_fork(
    store: ConversationStorage, source: str, target: str, events: list[ev.Event]
) -> None:
    """Create conversation `target` holding `events` (taken from `source`), with copies
    of the images they show; all or nothing."""
    await store.create(target)
    try:
        names = image_files(events)
        if names:
            source_dir, target_dir = store.conversation_dir(source), store.conversation_dir(target)
            await anyio.to_thread.run_sync(copy_images, names, source_dir, target_dir)
        for event in events:
            store.append(target, event)
        await store.sync(target)
        await store.sync_entries(target)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await store.release(target)
            await store.delete(target)
        raise
    await store.release(target)
