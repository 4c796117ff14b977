"""The lines `jp` prints for tool calls: titles, deliberate end lines, failed commands,
cancelled calls, and durations that leave out the time at a prompt."""

from __future__ import annotations

import io
import re
import time

from jpcli.call_summary import end_line, title_of
from jpcli.render import TurnRenderer

DIFF = "Modified kv.py (1 replacement).\n\n```diff\n--- kv.py\n+++ kv.py\n@@ -1 +1 @@\n-a\n+b\n```"


def renderer() -> tuple[TurnRenderer, io.StringIO]:
    err = io.StringIO()
    return TurnRenderer(io.StringIO(), err, out_tty=False, err_tty=False, color=False), err


def test_end_lines_are_deliberate_one_liners() -> None:
    assert end_line("fs_read_file", "Read kv.py (1-40)", '1 """Parse…\n2\n3', False, "") == (
        "✓ Read kv.py (1-40)",
        False,
    )
    assert end_line("fs_modify_file", "Edit kv.py", DIFF, False, " 0.1s") == (
        "✓ Edited kv.py (+1 -1) 0.1s",
        False,
    )
    assert end_line("run_command", "python -m unittest", "exit code: 1\n...", False, "") == (
        "✗ Ran python -m unittest: exit 1",
        True,
    )
    assert end_line("run_command", "true", "exit code: 0\nstdout:\n", False, "")[0] == (
        "✓ Ran true: exit 0"
    )


def test_a_multi_line_title_is_not_flattened() -> None:
    event = {"name": "run_command", "title": "cat <<EOF\n```py\nx\nEOF", "arguments": {}}
    assert title_of(event) == "cat <<EOF … (+3 lines)"
    assert title_of({"name": "x", "title": "a\x1b[2Jb"}) == "a\\u001b[2Jb"


def test_failed_command_shows_its_tail_and_cancelled_calls_get_a_line() -> None:
    shown, err = renderer()
    shown.handle({"kind": "tool_call", "id": "a", "name": "run_command", "title": "make"})
    output = "exit code: 2\nstdout:\n" + "\n".join(f"line {i}" for i in range(30))
    shown.handle({"kind": "tool_result", "id": "a", "content": output, "isError": False})
    shown.handle({"kind": "tool_call", "id": "b", "name": "fs_read_file", "title": "Read a.py"})
    shown.handle({"kind": "turn_completed", "stopReason": "cancelled"})
    lines = err.getvalue().splitlines()
    assert lines[0] == "⚙ make"
    assert re.fullmatch(r"✗ Ran make: exit 2 \d+\.\ds", lines[1])
    assert lines[2:12] == [f"  line {i}" for i in range(20, 30)]
    assert lines[-2:] == ["⚙ Read a.py", "✗ Read a.py: cancelled"]


def test_time_at_a_prompt_is_not_counted() -> None:
    shown, err = renderer()
    shown.handle({"kind": "tool_call", "id": "a", "name": "fs_modify_file", "title": "Edit a"})
    shown.paused()
    # The call was asked about at once, and the person took 30 s to answer.
    shown._tool_started["a"] -= 30
    shown._paused_at = time.monotonic() - 30
    shown.handle({"kind": "tool_result", "id": "a", "content": "bad", "isError": True})
    assert err.getvalue().splitlines()[-1] == "✗ Edit a 0.0s: bad"
