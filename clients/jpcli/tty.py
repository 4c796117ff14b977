"""Reading answers on the controlling terminal (`/dev/tty`), also when stdin is a pipe.

Standard library only. A line is read in the terminal's canonical mode (so the
kernel's line editing works) with echo on, or off for secrets (like `getpass`).
While it waits, a `check` callback is polled, so a question answered elsewhere can
be dismissed. Ctrl-C and end of input (Ctrl-D) at a prompt raise `PromptCancelled`.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

TTY_PATH = "/dev/tty"
_POLL = 0.1  # seconds between calls of `check` while waiting for a line
_MAX_LINE = 64 * 1024


class PromptCancelled(Exception):
    """The person dismissed the prompt: Ctrl-C, or end of input."""


class PromptDismissed(Exception):
    """The question went away while it was shown (answered elsewhere, timed out);
    the message says why, for the person."""


def tty_available(path: str = TTY_PATH) -> bool:
    """True when this process has a controlling terminal to prompt on."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return False
    try:
        return os.isatty(fd)
    finally:
        os.close(fd)


class _Interrupted(BaseException):
    """Raised by the temporary SIGINT handler to leave a blocking wait."""


class TerminalIO:
    """Prompt text written to, and lines read from, one terminal file descriptor.

    `check()` is polled while a line is awaited; a non-empty string it returns ends
    the wait with `PromptDismissed(that string)`.
    """

    def __init__(self, fd: int, *, check: Callable[[], str | None] | None = None) -> None:
        self.fd = fd
        self.check = check

    def write(self, text: str) -> None:
        """Write prompt text (the terminal's own output processing handles newlines)."""
        data = text.encode("utf-8", "replace")
        while data:
            written = os.write(self.fd, data)
            data = data[written:]

    def read_line(self, prompt: str, *, secret: bool = False) -> str:
        """Show `prompt`, then read one line (without its newline); what is typed is
        not shown when `secret`.

        Input typed before the prompt appeared is discarded: nothing typed ahead
        answers a question the person has not seen. Raises `PromptCancelled` (Ctrl-C,
        end of input) or `PromptDismissed`.
        """
        with self._line_mode(echo=not secret), self._sigint_cancels():
            try:
                self.write(prompt)
                return self._read()
            except _Interrupted:
                raise PromptCancelled("interrupted") from None
            finally:
                if secret:
                    self.write("\n")  # the Enter the person typed was not echoed either

    def _read(self) -> str:
        buffer = b""
        while True:
            reason = self.check() if self.check is not None else None
            if reason:
                raise PromptDismissed(reason)
            ready, _, _ = select.select([self.fd], [], [], _POLL)
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, 4096)
            except OSError as exc:  # the terminal went away (hang-up)
                raise PromptCancelled(str(exc)) from None
            if not chunk:
                if buffer:
                    return buffer.decode("utf-8", "replace")
                raise PromptCancelled("end of input")
            buffer += chunk
            if b"\n" in buffer or len(buffer) > _MAX_LINE:
                return buffer.split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8", "replace")

    @contextlib.contextmanager
    def _line_mode(self, *, echo: bool) -> Iterator[None]:
        try:
            import termios
        except ImportError:  # not a POSIX terminal: read as it is
            yield
            return
        try:
            saved = termios.tcgetattr(self.fd)
        except termios.error:
            yield
            return
        mode = list(saved)
        lflag = mode[3] | termios.ICANON | termios.ISIG
        mode[3] = (lflag | termios.ECHO) if echo else (lflag & ~termios.ECHO)
        try:
            termios.tcsetattr(self.fd, termios.TCSAFLUSH, mode)
            yield
        finally:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(self.fd, termios.TCSADRAIN, saved)

    @contextlib.contextmanager
    def _sigint_cancels(self) -> Iterator[None]:
        # Ctrl-C at a prompt dismisses the question only; the turn's own Ctrl-C
        # handling (cancel or detach) resumes afterwards. Handlers can only be set on
        # the main thread; elsewhere Ctrl-C keeps whatever it does.
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def interrupted(signum: int, frame: FrameType | None) -> Any:
            raise _Interrupted

        previous = signal.signal(signal.SIGINT, interrupted)
        try:
            yield
        finally:
            signal.signal(
                signal.SIGINT, signal.default_int_handler if previous is None else previous
            )


@contextlib.contextmanager
def open_terminal(
    check: Callable[[], str | None] | None = None, path: str = TTY_PATH
) -> Iterator[TerminalIO]:
    """The controlling terminal for one prompt; raises `PromptCancelled` without one."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
    except OSError as exc:
        raise PromptCancelled(f"no terminal to ask on: {exc.strerror or exc}") from None
    try:
        yield TerminalIO(fd, check=check)
    finally:
        os.close(fd)
