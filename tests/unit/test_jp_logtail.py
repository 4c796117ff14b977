"""`jpcli.logtail`: which lines of the daemon's log `jp` shows when it loses the daemon."""

from __future__ import annotations

from pathlib import Path

from jpcli import logtail

HEADER = "--- 2026-11-26T20:00:00 jp 0.1: jpd --listen"
INFO = "2026-11-26 20:00:01,001 jpd[7] INFO jpd.server: serving"
ERROR = "2026-11-26 20:00:02,002 jpd[7] ERROR jpd.core.turn: turn failed"
FATAL = [
    "Fatal Python error: Illegal instruction",
    "",
    "Current thread 0x00007f (most recent call first):",
    '  File "/x/llama_cpp/llama.py", line 1 in eval',
]


def write(tmp_path: Path, *lines: str) -> str:
    path = tmp_path / "jpd.log"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_fatal_signal_trace_is_shown(tmp_path: Path) -> None:
    log = write(tmp_path, HEADER, INFO, ERROR, INFO, *FATAL)
    assert logtail.explain(log) == [FATAL[0], *FATAL[2:]]
    message = logtail.died_message("lost the connection", log)
    assert message.splitlines() == [
        f"lost the connection; the end of {log} says:",
        *(f"  {line}" for line in [FATAL[0], *FATAL[2:]]),
    ]


def test_the_last_error_record_with_its_traceback(tmp_path: Path) -> None:
    trace = ["Traceback (most recent call last):", "  ...", "OSError: disk full"]
    log = write(tmp_path, HEADER, *FATAL, ERROR, *trace, INFO)
    assert logtail.explain(log) == [ERROR, *trace]


def test_only_what_the_last_start_wrote(tmp_path: Path) -> None:
    log = write(tmp_path, HEADER, *FATAL, HEADER, INFO, INFO)
    assert logtail.explain(log) == []
    assert logtail.died_message("lost it", log) == f"lost it; see {log}"


def test_long_traces_are_cut_and_a_missing_log_says_see(tmp_path: Path) -> None:
    frames = [f'  File "x.py", line {n} in f' for n in range(100)]
    log = write(tmp_path, FATAL[0], *frames)
    assert len(logtail.explain(log)) == logtail.MAX_LINES
    missing = str(tmp_path / "none.log")
    assert logtail.died_message("lost it", missing) == f"lost it; see {missing}"


def test_only_the_tail_of_a_large_log_is_read(tmp_path: Path) -> None:
    log = write(tmp_path, *FATAL, *[INFO] * 5000)
    assert logtail.explain(log) == []
