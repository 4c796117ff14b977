"""`jp acp`: a running command's live output as tool-call updates (terminal or text)."""

from __future__ import annotations

from typing import Any

from acp.schema import ClientCapabilities
from jpcli.acp.live_output import LiveOutput, declares_terminal_output
from jpcli.acp.updates import LiveTranslator

CALL = {"kind": "tool_call", "id": "c", "name": "run_command", "arguments": {"command": "make"}}


def dumped(translator: LiveTranslator, event: dict[str, Any]) -> list[dict[str, Any]]:
    return [u.model_dump(by_alias=True, exclude_none=True) for u in translator.translate(event)]


def progress(message: str) -> dict[str, Any]:
    return {"kind": "tool_progress", "id": "c", "progress": 1, "message": message}


def test_without_terminal_output_the_output_comes_once_as_the_result() -> None:
    translator = LiveTranslator()
    dumped(translator, CALL)
    assert dumped(translator, progress("one\n")) == []
    assert dumped(translator, progress("two\n")) == []
    result = "exit code: 0\none\ntwo\n"
    [final] = dumped(translator, {"kind": "tool_result", "id": "c", "content": result})
    assert final["status"] == "completed"
    assert final["content"] == [{"type": "content", "content": {"type": "text", "text": result}}]


def test_with_terminal_output_meta() -> None:
    capabilities = ClientCapabilities.model_validate({"_meta": {"terminal_output": True}})
    assert declares_terminal_output(capabilities)
    assert not declares_terminal_output(ClientCapabilities())
    translator = LiveTranslator(output=LiveOutput(terminal=True))
    dumped(translator, CALL)
    start, chunk = dumped(translator, progress("one\n"))
    assert start["content"] == [{"type": "terminal", "terminalId": "c"}]
    assert start["_meta"] == {"terminal_info": {"terminal_id": "c"}}
    assert chunk["_meta"] == {"terminal_output": {"terminal_id": "c", "data": "one\n"}}
    [again] = dumped(translator, progress("two\n"))
    assert again["_meta"]["terminal_output"]["data"] == "two\n"
    end = dumped(translator, {"kind": "tool_result", "id": "c", "content": "exit code: 2\n..."})
    assert end[0]["_meta"]["terminal_exit"] == {"terminal_id": "c", "exit_code": 2, "signal": None}
    assert end[1]["status"] == "completed"
    # The command's terminal stays (not replaced by a text block).
    assert end[1]["content"] == [{"type": "terminal", "terminalId": "c"}]


def test_progress_of_unknown_or_hidden_call_is_dropped() -> None:
    translator = LiveTranslator()
    assert dumped(translator, progress("x")) == []
