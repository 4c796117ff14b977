"""The instruction files of a working folder (`AGENTS.md`, jpd/core/instructions.py),
kept while nothing they were read from changed, so that a turn in the same folder
reads none of them again and needs no worker thread for its system prompt.

What a lookup depends on is what it saw (`instructions.Seen`): whether each workspace
marker existed, and the `lstat` of each folder below the workspace root and of each
file looked for (device, inode, size, modification and change times, type). Checking
them again is a `stat` each on the event loop; when all are the same, so is the
result. A lookup that went through a link (whose target may change unseen), met an
unreadable entry, or read a file changed within `RECENT_NS` of the lookup (its times
may not show a second change in the same clock tick) is not kept.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections import OrderedDict
from pathlib import Path

from jpd.config.models import AssistantConfig
from jpd.core.instructions import Seen, SystemPrompt, project_files, render_prompt

RECENT_NS = 2_000_000_000
"""Files changed this recently are read again each time (as jpd/config/cache.py does)."""

MAX_FOLDERS = 64
"""Folders remembered, least recently used dropped first."""

Files = tuple[list[tuple[str, str]], list[str]]
Stamp = tuple[int, int, int, int, int, int] | None


def _stamp(info: os.stat_result | None) -> Stamp:
    if info is None:
        return None
    if stat.S_ISDIR(info.st_mode):  # a folder's times change with any file made in it
        return (info.st_dev, info.st_ino, 0, 0, 0, info.st_mode)
    return (
        info.st_dev,
        info.st_ino,
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
        info.st_mode,
    )


class _Entry:
    def __init__(self, files: Files, seen: Seen) -> None:
        self.files = files
        self.markers = seen.markers
        self.entries = [(path, _stamp(info)) for path, info in seen.entries]

    def current(self) -> bool:
        """Whether a lookup now would see what this one saw."""
        for path, existed in self.markers:
            if os.path.exists(path) != existed:
                return False
        for path, stamp in self.entries:
            try:
                info: os.stat_result | None = os.lstat(path)
            except (FileNotFoundError, NotADirectoryError):
                info = None
            except OSError:
                return False
            if _stamp(info) != stamp:
                return False
        return True


class InstructionFiles:
    """The instruction files of each folder, per list of file names."""

    def __init__(self) -> None:
        self._entries: OrderedDict[tuple[str, tuple[str, ...]], _Entry] = OrderedDict()
        self._lock = threading.Lock()  # `load` runs in worker threads, `cached` on the loop

    def cached(self, assistant: AssistantConfig, folder: Path | None) -> SystemPrompt | None:
        """The system prompt when no file needs reading (a `stat` per file it depends
        on: call it on the event loop), else None (then `load` it)."""
        if folder is None or not assistant.agents_files:
            return render_prompt(assistant, [], [])
        key = (str(folder), tuple(assistant.agents_files))
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is None or not entry.current():
            return None
        return render_prompt(assistant, *entry.files)

    def load(self, assistant: AssistantConfig, folder: Path | None) -> SystemPrompt:
        """The system prompt, its files read now and kept if they may be reused. Reads
        files: call it from a worker thread."""
        if folder is None or not assistant.agents_files:
            return render_prompt(assistant, [], [])
        names = tuple(assistant.agents_files)
        seen = Seen()
        started = time.time_ns()
        files = project_files(folder, list(names), seen)
        key = (str(folder), names)
        with self._lock:
            if seen.reusable and not _recent(seen, started):
                self._entries[key] = _Entry(files, seen)
                self._entries.move_to_end(key)
                while len(self._entries) > MAX_FOLDERS:
                    self._entries.popitem(last=False)
            else:
                self._entries.pop(key, None)
        return render_prompt(assistant, *files)


def _recent(seen: Seen, now_ns: int) -> bool:
    """Whether any entry changed within `RECENT_NS` of `now_ns`."""
    for _path, info in seen.entries:
        if (
            info is not None
            and not stat.S_ISDIR(info.st_mode)
            and now_ns - max(info.st_mtime_ns, info.st_ctime_ns) < RECENT_NS
        ):
            return True
    return False


PROMPT_FILES = InstructionFiles()
"""The daemon's: one for every turn (the files are the same whoever asks)."""
