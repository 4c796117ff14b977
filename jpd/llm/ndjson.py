"""Newline-delimited JSON: an incremental splitter for streamed NDJSON bodies (Ollama).

Frames are lines; CRLF and LF both end one, blank lines are skipped, and a last line
without its terminator still counts when the body ends (a server may omit the final
newline; the provider's parser decides whether the answer is whole).
"""

from __future__ import annotations


class NDJSONDecoder:
    """Turns decoded text chunks into lines of JSON text; keep one per response body."""

    def __init__(self) -> None:
        self._buffer = ""

    def feed_data(self, text: str) -> list[str]:
        """Add `text` and return the lines it completes."""
        buffer = self._buffer + text if self._buffer else text
        lines = buffer.split("\n")
        self._buffer = lines.pop()
        return [stripped for line in lines if (stripped := line.strip())]

    def close_data(self) -> list[str]:
        """End of body: the unterminated last line, if any."""
        rest, self._buffer = self._buffer.strip(), ""
        return [rest] if rest else []
