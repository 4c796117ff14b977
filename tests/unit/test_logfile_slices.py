"""The sliced whole-log operations (jpd/conversation/logfile.py): the same results as
`split`/`count`/`join` on the whole log, so a large log never holds the GIL in one call."""

from __future__ import annotations

import pytest

from jpd.conversation import logfile
from jpd.conversation.logfile import count_lines, join_sliced, parse_lines, split_lines

SAMPLES = [
    b"",
    b"\n",
    b"\n\n",
    b"a",
    b"a\n",
    b"a\nb",
    b"abc\n\ndef\nghi\n",
    b"abc\n\ndef\nghi",
    b"x" * 50 + b"\n" + b"y" * 3 + b"\n" + b"z" * 40,
    b"".join(b"line %d\n" % i for i in range(200)),
]


def whole(data: bytes) -> list[tuple[int, bytes, bool]]:
    """What `split_lines` must yield, from one whole-log split."""
    lines = data.split(b"\n")
    tail = lines.pop()
    out = [(i, line, True) for i, line in enumerate(lines)]
    if tail:
        out.append((len(lines), tail, False))
    return out


@pytest.mark.parametrize("data", SAMPLES)
@pytest.mark.parametrize("slice_bytes", [1, 2, 3, 7, 64, 1 << 20])
def test_split_lines_matches_a_whole_split(data: bytes, slice_bytes: int) -> None:
    assert list(split_lines(data, slice_bytes)) == whole(data)


@pytest.mark.parametrize("data", SAMPLES)
@pytest.mark.parametrize("slice_bytes", [1, 3, 64])
def test_count_lines_matches_count(data: bytes, slice_bytes: int) -> None:
    assert count_lines(data, slice_bytes) == data.count(b"\n")


@pytest.mark.parametrize("n", [0, 1, 2, 5, 11])
def test_join_sliced_matches_join(n: int) -> None:
    parts = [b"p%d" % i for i in range(n)]
    assert join_sliced(parts, b",", slice_items=3) == b",".join(parts)


def test_parse_lines_slices_a_large_log_and_reports_lines_as_before(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """With tiny slices, a bad line in the middle and a torn last line are reported with
    their line numbers and every other event is kept."""
    monkeypatch.setattr(logfile, "SLICE_BYTES", 16)
    good = b'{"type":"chat_request","timestamp":"2026-01-01T00:00:00Z","content":"hi"}'
    data = b"\n".join([good, b"{not json", good, b""]) + b'{"type":"chat_req'
    with caplog.at_level("WARNING"):
        pairs = parse_lines(data, "log")
    assert [line for line, _ in pairs] == [good, good]
    text = caplog.text
    assert "skipping invalid line 2" in text
    assert "skipping torn last line 4" in text


class WholeLog(bytes):
    """A log whose whole-buffer `split`/`count` fail the test: only slices may be used."""

    def split(self, *args: object, **kwargs: object) -> list[bytes]:  # type: ignore[override]
        raise AssertionError("split over the whole log")

    def count(self, sub: object, start: object = None, end: object = None) -> int:  # type: ignore[override]
        assert isinstance(start, int) and isinstance(end, int)
        assert end - start <= logfile.SLICE_BYTES, "count over more than a slice"
        return bytes(self[start:end]).count(b"\n")


def test_parse_lines_never_splits_or_counts_the_whole_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each `split`/`count` call covers one slice, so the GIL is released between them."""
    monkeypatch.setattr(logfile, "SLICE_BYTES", 64)
    good = b'{"type":"chat_request","timestamp":"2026-01-01T00:00:00Z","content":"hi"}\n'
    pairs = parse_lines(WholeLog(good * 30), "log")
    assert len(pairs) == 30


@pytest.mark.parametrize("n", [0, 1, 1999, 2000, 2001, 4500])
def test_drop_sliced_empties_the_list(n: int) -> None:
    items = list(range(n))
    logfile.drop_sliced(items)
    assert items == []
