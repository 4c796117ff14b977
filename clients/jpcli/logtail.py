"""The lines of the daemon's log that say why it went away (shown when `jp` loses it).

The daemon's fault handler writes a fatal signal's traceback into the log ("Fatal
Python error: ..."), and its logger writes ERROR and CRITICAL records. Of the part of
the log written since the last start by `jp` (its "--- <time> jp <version>:" header),
the later of the last such traceback and the last such record is what explains an end;
a SIGKILL leaves neither, and then nothing is shown.
"""

from __future__ import annotations

import os
import re

TAIL_BYTES = 64 * 1024
MAX_LINES = 12
FATAL = "Fatal Python error"
_HEADER = re.compile(r"^--- \S+ jp ")
_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ \S+ (\w+) ")
_SERIOUS = frozenset({"ERROR", "CRITICAL"})


def _tail(path: str | os.PathLike[str]) -> list[str]:
    try:
        with open(path, "rb") as log:
            size = log.seek(0, os.SEEK_END)
            log.seek(max(0, size - TAIL_BYTES))
            data = log.read()
    except OSError:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    return lines[1:] if size > TAIL_BYTES else lines  # the first may be cut


def explain(path: str | os.PathLike[str]) -> list[str]:
    """The last lines of log `path` that explain an end (empty: none do)."""
    lines = _tail(path)
    for index in range(len(lines) - 1, -1, -1):
        if _HEADER.match(lines[index]):
            lines = lines[index + 1 :]
            break
    start: int | None = None
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index]
        if line.startswith(FATAL):
            start = index
            break
        record = _RECORD.match(line)
        if record and record.group(1) in _SERIOUS:
            start = index
            break
    if start is None:
        return []
    block = [lines[start]]
    for line in lines[start + 1 : start + MAX_LINES]:
        if _RECORD.match(line) or _HEADER.match(line):
            break  # the next record: not part of this one
        block.append(line)
    return [line for line in block if line.strip()]


def died_message(what: str, path: str | os.PathLike[str]) -> str:
    """`what` (how the connection ended), then the log lines that explain it."""
    lines = explain(path)
    if not lines:
        return f"{what}; see {path}"
    shown = "\n".join(f"  {line}" for line in lines)
    return f"{what}; the end of {path} says:\n{shown}"
