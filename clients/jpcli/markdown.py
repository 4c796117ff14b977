"""The answer rendered as markdown on a terminal, with rich, while it streams.

Imported only when stdout is a terminal (and `NO_COLOR` is unset): `rich` is not on
`jp`'s start-up path. Text is cut into blocks (paragraphs, lists, fenced code, ...)
at blank lines outside code fences. Each finished block is rendered for good; the
block still being written is shown live below it, re-rendered as it grows (cut to
the screen's height, so it never scrolls away half-drawn).
"""

from __future__ import annotations

import time
from typing import Any, TextIO

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.segment import Segment

from jpcli.render import TurnRenderer

_REFRESH = 0.05  # seconds between redraws of the live block
_QUIET_KINDS = ("text_delta", "usage")  # events that print nothing on stderr


def split_blocks(text: str) -> tuple[list[str], str]:
    """Split streamed markdown into finished blocks and the unfinished rest.

    A block ends at a blank line outside a fenced code block, or with the line that
    closes a fence. The last line is unfinished until its newline arrives.
    """
    *lines, rest_line = text.split("\n")
    blocks: list[str] = []
    current: list[str] = []
    fence: str | None = None
    for line in lines:
        stripped = line.strip()
        if fence is not None:
            current.append(line)
            if stripped.startswith(fence) and not stripped.strip(fence[0]):
                fence = None
                blocks.append("\n".join(current))
                current = []
        elif not stripped:
            if current:
                blocks.append("\n".join(current))
                current = []
        else:
            current.append(line)
            for marker in ("```", "~~~"):
                if stripped.startswith(marker):
                    fence = stripped[: len(stripped) - len(stripped.lstrip(marker[0]))]
                    break
    return blocks, "\n".join([*current, rest_line])


def _blank(line: list[Segment]) -> bool:
    return not "".join(segment.text for segment in line).strip()


class _Trimmed:
    """A renderable without blank lines at its edges, cut to its last `height` lines
    (blocks are spaced by the renderer, and a live block must fit on the screen)."""

    def __init__(
        self, renderable: RenderableType, height: int | None = None, *, lead: bool = False
    ) -> None:
        self.renderable = renderable
        self.height = height
        self.lead = lead  # a blank line first, to space it from the block above

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(self.renderable, options, pad=False)
        while lines and _blank(lines[-1]):
            lines.pop()
        start = 0
        while start < len(lines) and _blank(lines[start]):
            start += 1
        lines = lines[start:]
        if self.height is not None:
            lines = lines[-max(self.height - self.lead, 1) :]
        if self.lead:
            yield Segment.line()
        for line in lines:
            yield from line
            yield Segment.line()


class MarkdownRenderer:
    """Renders one turn's events like `TurnRenderer`, with the answer as markdown."""

    def __init__(self, out: TextIO, err: TextIO, *, err_tty: bool) -> None:
        self.console = Console(file=out, highlight=False)
        # Reasoning, tool calls and notes are written as by the plain renderer.
        self._plain = TurnRenderer(out, err, out_tty=True, err_tty=err_tty)
        self._pending = ""
        self._printed = False
        self._live: Live | None = None
        self._drawn = 0.0

    def handle(self, event: dict[str, Any]) -> None:
        """Render one event (`turn_completed` is the caller's business)."""
        if event.get("kind") == "text_delta":
            self.text(str(event.get("text", "")))
            return
        if event.get("kind") not in _QUIET_KINDS:
            self._flush()
        self._plain.handle(event)

    def text(self, text: str) -> None:
        """A piece of the answer."""
        if not text:
            return
        self._plain.finish()  # end an open reasoning line first
        blocks, self._pending = split_blocks(self._pending + text)
        for block in blocks:
            self._print(block)
        self._show_pending(force=self._live is None)

    def paused(self) -> None:
        """A prompt is about to be shown (its time is not the calls')."""
        self._plain.paused()

    def note(self, line: str) -> None:
        """One whole line on stderr."""
        self._flush()
        self._plain.note(line)

    def finish(self) -> None:
        """Render whatever is left and close open lines."""
        self._flush()
        self._plain.finish()

    def summary(self) -> None:
        """After the turn: its token usage (as the plain renderer shows it)."""
        self._flush()
        self._plain.summary()

    def suspend(self) -> None:
        """Erase the live block but keep the unfinished text (for a prompt in between):
        the next text redraws it whole, rendered."""
        if self._live is not None:
            self._live.stop()
            self._live = None
        self._plain.finish()

    # --- internals ---------------------------------------------------------------

    def _print(self, block: str) -> None:
        if self._printed:
            self.console.print()
        self.console.print(_Trimmed(Markdown(block)))
        self._printed = True

    def _show_pending(self, force: bool = False) -> None:
        if not self._pending.strip():
            return
        now = time.monotonic()
        if not force and self._live is not None and now - self._drawn < _REFRESH:
            return
        self._drawn = now
        tail = _Trimmed(Markdown(self._pending), self.console.height - 1, lead=self._printed)
        if self._live is None:
            self._live = Live(
                tail,
                console=self.console,
                auto_refresh=False,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start()
        self._live.update(tail, refresh=True)

    def _flush(self) -> None:
        if self._live is not None:
            self._live.stop()  # transient: the live block is erased, then printed for good
            self._live = None
        pending, self._pending = self._pending, ""
        if pending.strip():
            self._print(pending)
