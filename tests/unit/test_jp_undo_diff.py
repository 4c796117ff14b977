"""`jp`'s side of the workspace tools: the coloured diff of an edit, `jp turn undo`,
and `/undo` in `jp chat`."""

from __future__ import annotations

import io
from typing import Any

from jpcli.chat import ChatState, slash_command
from jpcli.diffs import edit_diff
from jpcli.parser import build_parser
from jpcli.render import TurnRenderer
from jpcli.rpc import RpcError
from jpcli.undo import turn_undo

RESULT = (
    "Modified calc.py (1 replacement).\n\n```diff\n--- a/calc.py\n+++ b/calc.py\n"
    "@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n```"
)


def test_edit_diff_is_coloured_on_a_terminal_only() -> None:
    plain = edit_diff(RESULT, color=False)
    assert plain == [
        "  --- a/calc.py",
        "  +++ b/calc.py",
        "  @@ -1,2 +1,2 @@",
        "   def add(a, b):",
        "  -    return a - b",
        "  +    return a + b",
    ]
    coloured = edit_diff(RESULT, color=True)
    assert coloured[4] == "  \033[31m-    return a - b\033[0m"
    assert coloured[5] == "  \033[32m+    return a + b\033[0m"
    assert edit_diff("no diff here", color=True) == []


def test_renderer_prints_the_diff_under_the_tool_line() -> None:
    out, err = io.StringIO(), io.StringIO()
    renderer = TurnRenderer(out, err, out_tty=False, err_tty=False)
    renderer.handle({"kind": "tool_call", "id": "1", "name": "fs_modify_file", "arguments": {}})
    renderer.handle({"kind": "tool_result", "id": "1", "content": RESULT, "isError": False})
    lines = err.getvalue().splitlines()
    assert lines[1].startswith("✓ fs_modify_file")
    assert "  +    return a + b" in lines and "\033" not in err.getvalue()


class FakeConnection:
    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.sent: list[tuple[str, Any]] = []

    def request(self, method: str, params: Any = None) -> Any:
        self.sent.append((method, params))
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def test_turn_undo_reports_each_file() -> None:
    conn = FakeConnection({"turnId": "t-1", "restored": ["/w/calc.py"], "removed": ["/w/new.py"]})
    out, err = io.StringIO(), io.StringIO()
    code = turn_undo(conn, None, conversation="c-1", out=out, err=err)  # type: ignore[arg-type]
    assert code == 0 and conn.sent == [("turn/undo", {"conversationId": "c-1"})]
    assert out.getvalue() == "undid turn t-1\n  restored /w/calc.py\n  removed  /w/new.py\n"


def test_turn_undo_refused_and_without_conversation() -> None:
    refused = RpcError(-32602, "changed since the turn, so not overwritten: /w/calc.py")
    conn = FakeConnection(refused)
    out, err = io.StringIO(), io.StringIO()
    assert turn_undo(conn, "t-1", conversation="c-1", out=out, err=err) == 1  # type: ignore[arg-type]
    assert conn.sent == [("turn/undo", {"conversationId": "c-1", "turnId": "t-1"})]
    assert (
        "cannot undo: changed since the turn" in err.getvalue() and "/w/calc.py" in err.getvalue()
    )
    assert turn_undo(conn, None, conversation=None, out=out, err=err) == 1  # type: ignore[arg-type]
    assert "no conversation" in err.getvalue()


def test_parser_and_chat_know_undo() -> None:
    args = build_parser().parse_args(["turn", "undo", "t-1", "-c", "c-2"])
    assert (args.command, args.action, args.turn, args.conversation) == (
        "turn",
        "undo",
        "t-1",
        "c-2",
    )
    written: list[str] = []
    assert slash_command("/undo", ChatState(), written.append)
    assert slash_command("/undo t-1", ChatState(), written.append)
    assert written == []  # recognised; the loop runs it


def test_edit_preview_for_the_permission_prompt() -> None:
    from jpcli.diffs import edit_preview

    modify = {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}
    assert edit_preview("fs_modify_file", modify, color=False) == ["  -a - b", "  +a + b"]
    created = edit_preview("fs_create_file", {"path": "x", "content": "1\n2\n"}, color=False)
    assert created == ["  +1", "  +2"]
    long = edit_preview("fs_create_file", {"content": "x\n" * 30}, color=False)
    assert len(long) == 21 and long[-1] == "   ... 10 more lines"
    assert edit_preview("deploy", {"old_text": "a"}, color=False) == []


def test_conversation_show_names_changed_files_and_undos() -> None:
    from jpcli.conversations.event_lines import format_persisted_event

    changed = {"type": "file_changed", "path": "/w/calc.py", "before": "ab", "after": "cd"}
    created = {"type": "file_changed", "path": "/w/new.py", "after": "cd", "tool_call_id": "c2"}
    assert format_persisted_event({**changed, "tool_call_id": "c1"}) == "changed /w/calc.py  [c1]"
    assert format_persisted_event(created) == "created /w/new.py  [c2]"
    undo = {"type": "turn_undo", "turn_id": "t-1", "restored": ["/w/calc.py"], "removed": []}
    assert format_persisted_event(undo) == "undid turn t-1\n  restored /w/calc.py"
