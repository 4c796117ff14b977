"""`jp chat`'s slash commands and multi-line input, without a terminal."""

from __future__ import annotations

import io

from jpcli.chat import ChatState, _read_message, history_file, slash_command


def run(line: str, state: ChatState) -> tuple[bool, str]:
    out = io.StringIO()
    return slash_command(line, state, out.write), out.getvalue()


def test_new_model_and_tools_change_the_state_for_later_turns() -> None:
    state = ChatState(conversation="c-1")
    assert run("/new", state)[0]
    assert (state.conversation, state.new) == (None, True)
    assert run("/model local/qwen", state)[0] and state.model == "local/qwen"
    assert run("/model", state)[0] and state.model is None
    run("/tools off", state)
    run("/tools on echo", state)
    assert state.tools == [{"enable": False}, {"enable": True, "name": "echo"}]


def test_messages_and_bad_commands() -> None:
    state = ChatState()
    assert run("hello /new", state) == (False, "")
    assert run("//not a command", state) == (False, "")
    handled, said = run("/tools maybe", state)
    assert handled and "unknown command" in said and state.tools == []
    handled, said = run("/help", state)
    assert handled and "/tools on|off [NAME]" in said and "Esc then Enter" in said
    assert run("/attach", state) == (True, "")  # the loop does the attaching


def test_mode_sets_the_permission_mode_of_later_turns() -> None:
    state = ChatState()
    assert run("/mode", state) == (True, "jp: mode: ask\n")
    assert run("/mode accept-edits", state) == (True, "jp: mode: accept-edits\n")
    handled, said = run("/mode yolo", state)
    assert handled and "unknown mode 'yolo'" in said and state.mode == "accept-edits"
    assert "/mode [MODE]" in run("/help", state)[1]


class Lines:
    def __init__(self, *lines: str) -> None:
        self.lines = list(lines)
        self.prompts: list[str] = []

    def prompt(self, text: str) -> str:
        self.prompts.append(text)
        return self.lines.pop(0)


def test_trailing_backslash_continues_the_message() -> None:
    session = Lines("first \\", "second\\", "third", "next")
    assert _read_message(session) == "first \nsecond\nthird"
    assert session.prompts == ["jp> ", "... ", "... "]


def test_history_lives_in_the_state_dir() -> None:
    assert history_file({"JP_STATE_DIR": "/s"}) == "/s/chat_history"


def test_compact_is_a_command_handled_by_the_loop() -> None:
    state = ChatState(conversation="c-1")
    assert run("/compact", state) == (True, "")
    assert run("/compact keep the API names", state) == (True, "")
    assert state.conversation == "c-1"


def test_usage_line_shows_how_full_the_context_is() -> None:
    from jpcli.render import format_compacted, format_context

    assert format_context({"used": 82_000, "window": 200_000}) == "context 41% of 200,000"
    assert format_context({"used": 5}) == ""
    event = {"method": "stub", "tokensBefore": 1500, "tokensAfter": 900}
    assert format_compacted(event) == "jp: context old tool outputs cleared: 1,500 -> 900 tokens"
    assert format_compacted({"compacted": False}).startswith("jp: nothing to compact")
