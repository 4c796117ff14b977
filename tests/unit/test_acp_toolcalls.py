"""The ACP content of a tool call, from the daemon's `tool_call` event."""

from __future__ import annotations

from acp.schema import FileEditToolCallContent
from jpcli.acp.toolcalls import CallView, tool_ended, tool_started


def test_kind_locations_and_diff_come_from_the_event() -> None:
    event = {
        "toolKind": "edit",
        "locations": [{"path": "/w/calc.py"}],
        "diff": {"path": "/w/calc.py", "oldText": "a - b", "newText": "a + b"},
    }
    view = CallView.of("fs_modify_file", event)
    started = tool_started("c1", "fs_modify_file", {"path": "calc.py"}, view)
    assert started.kind == "edit"
    assert [(loc.path, loc.line) for loc in started.locations or []] == [("/w/calc.py", None)]
    [diff] = started.content or []
    assert isinstance(diff, FileEditToolCallContent)
    assert (diff.path, diff.old_text, diff.new_text) == ("/w/calc.py", "a - b", "a + b")
    done = tool_ended("c1", "Modified calc.py", False, view)
    assert done.status == "completed" and isinstance(
        (done.content or [])[0], FileEditToolCallContent
    )
    failed = tool_ended("c1", "old_text not found", True, view)
    assert failed.status == "failed" and len(failed.content or []) == 1  # no diff: nothing changed


def test_a_created_file_has_no_old_text_and_unknown_kinds_are_guessed() -> None:
    created = CallView.of(
        "fs_create_file", {"toolKind": "edit", "diff": {"path": "/w/n", "newText": "x"}}
    )
    assert created.diff[0].old_text is None  # type: ignore[union-attr]
    assert CallView.of("run_tests", {"toolKind": "other"}).kind == "execute"
    assert CallView.of("grep_logs").kind == "search"
    assert (
        CallView.of("deploy", {"toolKind": "bogus", "locations": [{"nopath": 1}]}).locations == []
    )


def test_a_replayed_edit_shows_its_diff_from_the_log() -> None:
    from jpcli.acp.updates import history

    args = {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}
    events = [
        {"type": "turn_start", "turn_id": "t1"},
        {"type": "tool_call_request", "id": "call_1", "name": "fs_modify_file", "arguments": args},
        {"type": "file_changed", "turn_id": "t1", "tool_call_id": "call_1", "path": "/w/calc.py"},
        {"type": "tool_call_response", "id": "call_1", "content": "Modified calc.py"},
        {"type": "turn_start", "turn_id": "t2"},
        {"type": "tool_call_request", "id": "call_1", "name": "fs_read_file", "arguments": {}},
        {"type": "tool_call_response", "id": "call_1", "content": "1\tx"},
    ]
    started, ended, read, _ = history(events, frozenset())
    assert started.kind == "edit"  # type: ignore[union-attr]
    [diff] = started.content or []  # type: ignore[union-attr]
    assert isinstance(diff, FileEditToolCallContent) and diff.path == "/w/calc.py"
    assert (diff.old_text, diff.new_text) == ("a - b", "a + b")
    assert isinstance((ended.content or [])[0], FileEditToolCallContent)  # type: ignore[union-attr]
    assert read.kind == "read" and not read.content  # type: ignore[union-attr]
