"""The ACP content of a tool call, from the daemon's `tool_call` event."""

from __future__ import annotations

from pathlib import Path

from acp.schema import FileEditToolCallContent
from jpcli.acp.toolcalls import CallView, tool_ended, tool_started


def test_kind_locations_and_diff_come_from_the_event() -> None:
    event = {
        "toolKind": "edit",
        "locations": [{"path": "/w/calc.py"}],
        "diff": {"path": "/w/calc.py", "oldText": "a - b", "newText": "a + b"},
    }
    view = CallView.of("fs_modify_file", event)
    started = tool_started("c1", view, {"path": "calc.py"})
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
    # The provider numbered calls per response: the second `call_1` is another entry.
    assert started.tool_call_id == "call_1"  # type: ignore[union-attr]
    assert read.tool_call_id == "call_1~2"  # type: ignore[union-attr]
    assert read.title == "fs_read_file"  # type: ignore[union-attr]


def test_replay_keeps_titles_read_locations_and_shows_update_plan_as_a_plan_only() -> None:
    from jpcli.acp.updates import history

    plan = {"plan": [{"step": "fix add", "status": "in_progress"}]}
    events = [
        {"type": "turn_start", "turn_id": "t1", "workspace": "/w"},
        {
            "type": "tool_call_request",
            "id": "a",
            "name": "fs_read_file",
            "arguments": {"path": "src/calc.py", "start_line": 3, "end_line": 9},
            "title": "Read src/calc.py (3-9)",
        },
        {"type": "tool_call_response", "id": "a", "content": "..."},
        {"type": "tool_call_request", "id": "p", "name": "update_plan", "arguments": plan},
        {"type": "tool_call_response", "id": "p", "content": "ok"},
        {"type": "tool_call_request", "id": "b", "name": "run_command", "arguments": {}},
    ]
    read, _, shown_plan, _, cut = history(events, frozenset())
    assert read.title == "Read src/calc.py (3-9)"  # type: ignore[union-attr]
    [where] = read.locations or []  # type: ignore[union-attr]
    assert (where.path, where.line) == ("/w/src/calc.py", 3)
    assert shown_plan.session_update == "plan"
    # A call the log never answered (the turn was cut) is not left in progress.
    assert cut.session_update == "tool_call_update" and cut.status == "failed"  # type: ignore[union-attr]


def test_live_calls_get_unique_ids_and_end_when_the_turn_is_cancelled() -> None:
    from jpcli.acp.updates import LiveTranslator

    first = LiveTranslator()
    call = {"kind": "tool_call", "id": "call_1", "name": "run_command", "title": "make -j4"}
    [started] = first.translate({**call, "arguments": {"command": "make -j4"}})
    assert started.title == "make -j4"  # type: ignore[union-attr]
    first.translate({"kind": "tool_result", "id": "call_1", "content": "ok", "isError": False})
    second = LiveTranslator(ids=first.ids)
    [again] = second.translate({**call, "arguments": {}})
    assert again.tool_call_id == "call_1~2"  # type: ignore[union-attr]
    [ended] = second.translate({"kind": "turn_completed", "stopReason": "cancelled"})
    assert ended.tool_call_id == "call_1~2" and ended.status == "failed"  # type: ignore[union-attr]
    plan = {"plan": [{"step": "x", "status": "pending"}]}
    assert (
        second.translate({"kind": "tool_call", "id": "p", "name": "update_plan", "arguments": plan})
        == []
    )
    [shown] = second.translate(
        {"kind": "tool_result", "id": "p", "content": "ok", "isError": False}
    )
    assert shown.session_update == "plan"


def test_replay_gives_resource_links_back() -> None:
    from jpcli.acp.updates import history

    message = "look at this\n\n[calc.py](file:///w/calc.py)\n\nand fix it"
    text, link, rest = history([{"type": "chat_request", "content": message}], frozenset())
    assert text.content.text == "look at this"  # type: ignore[union-attr]
    assert (link.content.type, link.content.name, link.content.uri) == (  # type: ignore[union-attr]
        "resource_link",
        "calc.py",
        "file:///w/calc.py",
    )
    assert rest.content.text == "and fix it"  # type: ignore[union-attr]
    [plain] = history([{"type": "chat_request", "content": "[x] done (y)"}], frozenset())
    assert plain.content.text == "[x] done (y)"  # type: ignore[union-attr]


def test_replay_shows_a_messages_images_from_the_conversations_folder(tmp_path: Path) -> None:
    from jpcli.acp.images import image_reader
    from jpcli.acp.updates import history

    folder = tmp_path / "conversations" / "c-1" / "images"
    folder.mkdir(parents=True)
    (folder / "a.png").write_bytes(b"PNG")
    (tmp_path / "secret.png").write_bytes(b"not yours")
    images = [
        {"file": "images/a.png", "mime_type": "image/png"},
        {"file": "../../secret.png", "mime_type": "image/png"},  # outside: never read
    ]
    event = {"type": "chat_request", "content": "what is this?", "images": images}
    text, image, refused = history([event], frozenset(), None, image_reader(str(tmp_path), "c-1"))
    assert text.content.text == "what is this?"  # type: ignore[union-attr]
    assert (image.content.type, image.content.data) == ("image", "UE5H")  # type: ignore[union-attr]
    assert refused.content.type == "text" and "an image" in refused.content.text  # type: ignore[union-attr]
    # Without the folder (over --remote) the replay says an image was there.
    [_, note] = history(
        [event | {"images": images[:1]}], frozenset(), None, image_reader(None, "c-1")
    )
    assert "an image was sent" in note.content.text  # type: ignore[union-attr]
