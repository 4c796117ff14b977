"""`jp` shows a running call's live output (`tool_progress` messages) under its line."""

from __future__ import annotations

import io

from jpcli.render import TurnRenderer


def test_live_output_lines_under_the_call() -> None:
    err = io.StringIO()
    renderer = TurnRenderer(io.StringIO(), err, out_tty=False, err_tty=False, color=False)
    renderer.handle({"kind": "tool_call", "id": "c", "name": "run_command", "arguments": {}})
    for chunk in ("one\ntw", "o\n", "tail"):
        renderer.handle({"kind": "tool_progress", "id": "c", "progress": 1, "message": chunk})
    renderer.handle({"kind": "tool_progress", "id": "c", "progress": 0.5})  # no text: nothing
    renderer.handle({"kind": "tool_result", "id": "c", "content": "exit code: 0"})
    lines = err.getvalue().splitlines()
    assert lines[1:4] == ["  │ one", "  │ two", "  │ tail"]
    assert lines[4].startswith("✓ Ran run_command(): exit 0")
