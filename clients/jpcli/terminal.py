"""Terminal helpers: a spinner on stderr and a single-key choice read from the terminal.

Standard library only (termios/tty are imported when a choice is actually asked).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping
from typing import TextIO

_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_INTERVAL = 0.08  # seconds between frames


class Spinner:
    """A one-line spinner with a label, drawn on a terminal stream, erased by `clear`.

    `tick` is called from the client's event loop whenever it waits; nothing runs in
    the background. Disabled (every call a no-op) when `enabled` is false.
    """

    def __init__(self, stream: TextIO, *, enabled: bool) -> None:
        self.stream = stream
        self.enabled = enabled
        self._frame = 0
        self._shown = False
        self._last = 0.0

    def tick(self, label: str) -> None:
        """Draw the next frame (at most every few tens of milliseconds)."""
        if not self.enabled:
            return
        now = time.monotonic()
        if self._shown and now - self._last < _INTERVAL:
            return
        self._last = now
        frame = _FRAMES[self._frame % len(_FRAMES)]
        self._frame += 1
        self._write(f"\r{frame} {label}\x1b[K")
        self._shown = True

    def clear(self) -> None:
        """Erase the spinner line, if shown."""
        if self._shown:
            self._write("\r\x1b[K")
            self._shown = False

    def _write(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.stream.write(text)
            self.stream.flush()


def choose(prompt: str, keys: Mapping[str, str], default: str) -> str:
    """Ask for one key on the controlling terminal; returns `keys[key]`.

    Enter or Escape choose `default` (a value of `keys`). Without a terminal, returns
    `default` at once. Ctrl-C still raises `KeyboardInterrupt` (signals stay on).
    """
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return default
    import termios
    import tty

    try:
        saved = termios.tcgetattr(fd)
    except termios.error:
        os.close(fd)
        return default
    try:
        tty.setcbreak(fd)  # one key at a time, no echo; ISIG stays, so Ctrl-C still works
        os.write(fd, prompt.encode())
        while True:
            data = os.read(fd, 1)
            if not data:
                choice = default
                break
            key = data.decode(errors="ignore").lower()
            if key in keys:
                choice = keys[key]
                break
            if key in ("\r", "\n", "\x1b"):
                choice = default
                break
        os.write(fd, f"{choice}\n".encode())
        return choice
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        os.close(fd)
