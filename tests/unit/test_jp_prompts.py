"""`jp` prompts: answer parsing, remember rules, defaults, rendering, the terminal
(a real pseudo-terminal: secrets are not echoed), the prompter's JSON-RPC side,
`-t`/`-T` toggles and `jp inquiry`."""

from __future__ import annotations

import contextlib
import io
import os
import select
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from jpcli.__main__ import _asks, main
from jpcli.follow import Follow, Follower, Interrupts
from jpcli.inquiries import inquiry_answer, inquiry_row
from jpcli.parser import build_parser
from jpcli.prompter import CAPABILITIES, NOT_MINE, TerminalPrompter
from jpcli.prompts import BadPrompt, PromptIO, Prompts, parse_boolean, parse_select
from jpcli.render import TurnRenderer
from jpcli.rpc import Connection, Notification, RpcError
from jpcli.terminal import Spinner
from jpcli.tty import PromptCancelled, PromptDismissed, TerminalIO, tty_available

from tests.unit.test_jp_client import FAKE, Peer, sent_params

# --- fakes ---------------------------------------------------------------------------


class FakeIO:
    """Scripted answers; records every prompt and note, and which reads were secret."""

    def __init__(self, *lines: str | BaseException) -> None:
        self.lines = list(lines)
        self.prompts: list[str] = []
        self.secret: list[bool] = []
        self.written: list[str] = []

    def write(self, text: str) -> None:
        self.written.append(text)

    def read_line(self, prompt: str, *, secret: bool = False) -> str:
        self.prompts.append(prompt)
        self.secret.append(secret)
        line = self.lines.pop(0)
        if isinstance(line, BaseException):
            raise line
        return line

    @property
    def shown(self) -> str:
        return "".join(self.prompts) + "".join(self.written)


def question(
    kind: str = "boolean",
    *,
    options: list[str] | None = None,
    label: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    answer_type: dict[str, Any] = {"type": kind}
    if options is not None:
        answer_type["options"] = options
    params: dict[str, Any] = {
        "inquiryId": "c1.q.1",
        "conversationId": "c-1",
        "turnId": "t-1",
        "toolName": "deploy",
        "source": {"type": "tool", "name": "deploy"},
        "question": {"id": "q", "text": "Proceed?", "answerType": answer_type, **fields},
    }
    if label is not None:
        params["promptLabel"] = label
    return params


def ask(params: dict[str, Any], *lines: str | BaseException) -> tuple[dict[str, Any], FakeIO]:
    fake = FakeIO(*lines)
    return Prompts(fake, color=False).inquiry(params), fake


# --- parsing -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "can_remember", "expected"),
    [
        ("y", True, (True, False)),
        ("yes", True, (True, False)),
        ("Y", True, (True, True)),
        ("N", True, (False, True)),
        ("n", True, (False, False)),
        (" No ", True, (False, False)),
        ("YES", True, (True, False)),  # only a lone uppercase letter remembers
        ("Y", False, (True, False)),  # persistence "none": never remembered
        ("N", False, (False, False)),
    ],
)
def test_parse_boolean(line: str, can_remember: bool, expected: tuple[bool, bool]) -> None:
    assert parse_boolean(line, can_remember=can_remember) == expected


def test_parse_boolean_default_and_errors() -> None:
    assert parse_boolean("", default=False) == (False, False)
    with pytest.raises(ValueError, match=r"y or n \(Y or N"):
        parse_boolean("")
    with pytest.raises(ValueError, match=r"^please answer y or n$"):
        parse_boolean("maybe", can_remember=False)


@pytest.mark.parametrize(
    ("line", "default", "expected"),
    [("2", None, "dev"), ("dev", None, "dev"), ("DEV", None, "dev"), ("", "main", "main")],
)
def test_parse_select(line: str, default: str | None, expected: str) -> None:
    assert parse_select(line, ["main", "dev"], default) == expected


@pytest.mark.parametrize("line", ["0", "3", "-1", "", "prod", "1.5"])
def test_parse_select_rejects(line: str) -> None:
    with pytest.raises(ValueError, match="from 1 to 2"):
        parse_select(line, ["main", "dev"])


# --- questions -----------------------------------------------------------------------


def test_boolean_uppercase_remembers_and_header_context_come_first() -> None:
    params = question(label="Deploy", context="Pushes main to prod.\nTakes a minute.")
    result, fake = ask(params, "Y")
    assert result == {"answer": True, "remember": True}
    assert fake.prompts == [
        "\n── Deploy ──\n  Pushes main to prod.\n  Takes a minute.\nProceed? [y/n/Y/N] "
    ]


def test_boolean_without_remembering_offers_y_n_only() -> None:
    result, fake = ask(question(persistence="none"), "Y")
    assert result == {"answer": True, "remember": False}
    assert fake.prompts[0].endswith("Proceed? [y/n] ") and "Y/N" not in fake.prompts[0]
    assert "── deploy ──" in fake.prompts[0]  # no label: the tool's name


def test_boolean_default_shown_and_taken_on_empty_input() -> None:
    result, fake = ask(question(default=False), "")
    assert result == {"answer": False, "remember": False}
    assert fake.prompts[0].endswith("[y/n/Y/N] (default: no) ")


def test_invalid_input_is_explained_and_asked_again() -> None:
    result, fake = ask(question(), "", "sure", "n")
    assert result == {"answer": False, "remember": False}
    assert len(fake.prompts) == 3
    assert fake.prompts[1].startswith("jp: please answer y or n")
    assert fake.prompts[1].endswith("Proceed? [y/n/Y/N] ")


def test_previous_error_is_shown_before_the_question() -> None:
    params = {**question(), "previousError": "answer must be true or false"}
    _, fake = ask(params, "y")
    shown = fake.prompts[0]
    assert shown.index("refused: answer must be true or false") < shown.index("Proceed?")


def test_select_numbered_answer_is_the_option_text() -> None:
    result, fake = ask(question("select", options=["main", "dev"], default="dev"), "1")
    assert result == {"answer": "main", "remember": False}
    assert fake.prompts[0].endswith("Proceed?\n  1. main\n  2. dev\nChoose 1-2 (default: 2): ")
    again, fake = ask(question("select", options=["main", "dev"]), "9", "", "2")
    assert again == {"answer": "dev", "remember": False}
    assert (
        len(fake.prompts) == 3
        and fake.prompts[1] == "jp: please choose a number from 1 to 2\nChoose 1-2: "
    )


def test_select_default_on_empty_input() -> None:
    result, _ = ask(question("select", options=["main", "dev"], default="dev"), "")
    assert result == {"answer": "dev", "remember": False}


def test_text_line_and_default() -> None:
    result, fake = ask(question("text", default="Bob"), "Alice Smith")
    assert result == {"answer": "Alice Smith", "remember": False}
    assert fake.prompts[0].endswith('Proceed? (default: "Bob") ') and fake.secret == [False]
    result, _ = ask(question("text", default="Bob"), "")
    assert result["answer"] == "Bob"
    result, _ = ask(question("text"), "")
    assert result["answer"] == ""


def test_a_text_answer_ending_in_two_bangs_is_remembered_for_the_turn() -> None:
    result, _ = ask(question("text"), "main.py !!")
    assert result == {"answer": "main.py", "remember": True}
    result, _ = ask(question("text"), "Hello!")  # one `!` is part of the answer
    assert result == {"answer": "Hello!", "remember": False}
    result, _ = ask(question("text", persistence="none"), "main.py !!")
    assert result == {"answer": "main.py !!", "remember": False}
    result, _ = ask(question("secret"), "s3cret !!")  # a secret is never remembered
    assert result == {"answer": "s3cret !!", "remember": False}


def test_secret_is_read_hidden_and_never_shows_a_default() -> None:
    result, fake = ask(question("secret", default="leaked-default"), "s3cret")
    assert result == {"answer": "s3cret", "remember": False}
    assert fake.secret == [True]
    assert "leaked-default" not in fake.shown and "s3cret" not in fake.shown
    assert fake.prompts[0].endswith("Proceed? (hidden) ")


def test_colour_header_only_with_colour() -> None:
    fake = FakeIO("y")
    Prompts(fake, color=True).inquiry(question(label="Assistant"))
    assert "\x1b[1m── Assistant ──\x1b[0m" in fake.prompts[0]
    _, plain = ask(question(label="Assistant"), "y")
    assert "\x1b" not in plain.prompts[0]


@pytest.mark.parametrize(
    "params",
    [
        None,
        {"question": {"text": "x"}},
        {"question": {"text": "x", "answerType": {"type": "file"}}},
        {"question": {"text": "x", "answerType": {"type": "select"}}},
        {"question": {"text": 3, "answerType": {"type": "text"}}},
    ],
)
def test_malformed_questions_are_refused(params: Any) -> None:
    with pytest.raises(BadPrompt):
        Prompts(FakeIO(), color=False).inquiry(params)


def test_cancel_passes_through() -> None:
    with pytest.raises(PromptCancelled):
        ask(question(), PromptCancelled("end of input"))


# --- permissions ---------------------------------------------------------------------


def permission(kind: str = "run", content: str | None = None) -> dict[str, Any]:
    return {
        "conversationId": "c-1",
        "turnId": "t-1",
        "toolCallId": "call_7",
        "toolName": "rm",
        "arguments": {"path": "build/"},
        "kind": kind,
        "content": content,
    }


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("y", {"allow": True, "remember": False}),
        ("N", {"allow": False, "remember": True}),
        ("Y", {"allow": True, "remember": True}),
    ],
)
def test_permission_answers(line: str, expected: dict[str, bool]) -> None:
    fake = FakeIO(line, "")  # "" : no reason given for a refusal
    assert Prompts(fake, color=False).permission(permission()) == expected
    assert 'the assistant wants to run ⚙ rm(path="build/")' in fake.prompts[0]
    assert fake.prompts[0].endswith("Allow running rm? [y/n/Y/N] ")


def test_permission_has_no_default() -> None:
    fake = FakeIO("", "n", "")
    assert Prompts(fake, color=False).permission(permission())["allow"] is False
    assert fake.prompts[1].startswith("jp: please answer y or n")


def test_a_refusal_may_say_why() -> None:
    fake = FakeIO("n", "  use make clean instead ")
    answer = Prompts(fake, color=False).permission(permission())
    assert answer == {"allow": False, "remember": False, "reason": "use make clean instead"}
    assert fake.prompts[1].startswith("Why not?")


def test_an_edit_prompt_shows_the_title_and_a_numbered_diff_once() -> None:
    seen = {
        "title": "Write notes.md",
        "diff": {"path": "/w/notes.md", "oldText": "a\nb\n", "newText": "a\nc\n"},
    }
    params = {**permission(), "toolName": "fs_create_file", "arguments": {"content": "a\nc\n"}}
    fake = FakeIO("y")
    Prompts(fake, color=False).permission(params, seen)
    shown = fake.prompts[0]
    assert "the assistant wants to: Write notes.md" in shown
    assert "    1 │  a\n" in shown and "    2 │ -b\n" in shown and "    2 │ +c\n" in shown
    assert "content" not in shown  # the content once, as the diff


def test_deliver_permission_previews_the_result() -> None:
    content = "\n".join(f"line {n}" for n in range(1, 12))
    fake = FakeIO("y")
    Prompts(fake, color=False).permission(permission("deliver", content))
    shown = fake.prompts[0]
    assert "send its result to the assistant?" in shown
    assert "  │ line 1\n" in shown and "  │ line 8\n" in shown and "line 9" not in shown
    assert "… (3 more lines)" in shown and shown.endswith("Deliver the result? [y/n/Y/N] ")


def test_sampling_permission_shows_what_the_server_asks() -> None:
    params = {
        **permission("sampling"),
        "toolName": "summarize",
        "arguments": {"messages": [{"role": "user", "text": "Summarize: long"}], "maxTokens": 50},
    }
    fake = FakeIO("y")
    assert Prompts(fake, color=False).permission(params) == {"allow": True, "remember": False}
    shown = fake.prompts[0]
    assert "the MCP server of summarize asks the model to answer:" in shown
    assert "  │ Summarize: long" in shown and shown.endswith("Let the model answer it? [y/n/Y/N] ")


# --- the terminal --------------------------------------------------------------------


@pytest.fixture
def pty() -> Iterator[tuple[int, int]]:
    master, slave = os.openpty()
    yield master, slave
    os.close(master)
    os.close(slave)


def _read_until(fd: int, marker: bytes, limit: float = 10) -> bytes:
    seen = b""
    deadline = time.monotonic() + limit
    while marker not in seen:
        assert time.monotonic() < deadline, f"{marker!r} not seen in {seen!r}"
        if select.select([fd], [], [], 0.05)[0]:
            seen += os.read(fd, 4096)
    return seen


def _type_after_prompt(master: int, prompt: bytes, typed: bytes) -> threading.Thread:
    """In a thread: wait until `prompt` is shown, then type `typed`."""

    def person() -> None:
        _read_until(master, prompt)
        os.write(master, typed)

    thread = threading.Thread(target=person)
    thread.start()
    return thread


def _drain(fd: int) -> bytes:
    # Echo happens as the line is read in, so once it was read, any echo is buffered.
    data = b""
    while select.select([fd], [], [], 0.1)[0]:
        data += os.read(fd, 4096)
    return data


def test_terminal_secret_is_not_echoed(pty: tuple[int, int]) -> None:
    master, slave = pty
    thread = _type_after_prompt(master, b"Token? ", b"hunter2\n")
    assert TerminalIO(slave).read_line("Token? ", secret=True) == "hunter2"
    thread.join()
    assert b"hunter2" not in _drain(master)


def test_terminal_text_is_echoed(pty: tuple[int, int]) -> None:
    master, slave = pty
    thread = _type_after_prompt(master, b"Name? ", b"Alice\n")
    assert TerminalIO(slave).read_line("Name? ") == "Alice"
    thread.join()
    assert b"Alice" in _drain(master)


def test_terminal_end_of_input_cancels(pty: tuple[int, int]) -> None:
    master, slave = pty
    thread = _type_after_prompt(master, b"Name? ", b"\x04")  # Ctrl-D
    with pytest.raises(PromptCancelled):
        TerminalIO(slave).read_line("Name? ")
    thread.join()


def test_terminal_check_dismisses_the_prompt(pty: tuple[int, int]) -> None:
    _, slave = pty
    calls = iter([None, None, "answered elsewhere"])
    terminal = TerminalIO(slave, check=lambda: next(calls))
    with pytest.raises(PromptDismissed, match="answered elsewhere"):
        terminal.read_line("Name? ")


def test_tty_available(pty: tuple[int, int], tmp_path: Path) -> None:
    assert tty_available(os.ttyname(pty[1]))
    assert not tty_available(str(tmp_path / "missing"))
    (tmp_path / "file").write_text("")
    assert not tty_available(str(tmp_path / "file"))


# --- the prompter on a connection ----------------------------------------------------


@pytest.fixture
def connected() -> Iterator[tuple[Connection, Peer]]:
    client_sock, server_sock = socket.socketpair()
    connection = Connection(client_sock.makefile("rb"), client_sock.makefile("wb"))
    peer = Peer(server_sock)
    yield connection, peer
    connection.close()
    peer.close()
    client_sock.close()


def prompter_with(io_factory: Callable[[Callable[[], str | None]], PromptIO]) -> TerminalPrompter:
    @contextlib.contextmanager
    def open_io(check: Callable[[], str | None]) -> Iterator[PromptIO]:
        yield io_factory(check)

    prompter = TerminalPrompter(color=False, open_io=open_io)
    prompter.conversation_id = "c-1"
    return prompter


def _request(peer: Peer, request_id: int, method: str, params: Any) -> None:
    peer.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def _receive_all(connection: Connection, peer: Peer) -> None:
    """Let `receive` answer everything sent so far (a notification marks the end)."""
    peer.send({"jsonrpc": "2.0", "method": "mark"})
    assert connection.receive(timeout=10) == Notification("mark", None)


def test_prompter_answers_inquiries_and_permissions(connected: tuple[Connection, Peer]) -> None:
    connection, peer = connected
    fakes = [FakeIO("Y"), FakeIO("n", "")]
    paused: list[bool] = []
    prompter = prompter_with(lambda check: fakes.pop(0))
    prompter.before_prompt = lambda: paused.append(True)
    prompter.install(connection)
    _request(peer, 1, "inquiry/prompt", question())
    _request(peer, 2, "tool/permission", permission())
    _receive_all(connection, peer)
    assert peer.read() == {"jsonrpc": "2.0", "id": 1, "result": {"answer": True, "remember": True}}
    assert peer.read()["result"] == {"allow": False, "remember": False}
    assert paused == [True, True]  # the spinner was stopped before each prompt


def test_prompter_errors(connected: tuple[Connection, Peer]) -> None:
    connection, peer = connected
    fakes = [FakeIO(PromptCancelled("interrupted")), FakeIO()]
    prompter_with(lambda check: fakes.pop(0)).install(connection)
    _request(peer, 1, "inquiry/prompt", question())  # Ctrl-C
    _request(peer, 2, "inquiry/prompt", {**question(), "conversationId": "c-other"})
    _request(peer, 3, "inquiry/prompt", {"conversationId": "c-1"})  # malformed
    _request(peer, 4, "inquiry/prompt", {**question(), "question": {"text": "x"}})
    _receive_all(connection, peer)
    codes = [peer.read()["error"]["code"] for _ in range(4)]
    assert codes == [-32800, NOT_MINE, -32602, -32602]


def test_prompt_resolved_before_it_is_shown_is_skipped(connected: tuple[Connection, Peer]) -> None:
    connection, peer = connected
    shown: list[FakeIO] = []

    def make(check: Callable[[], str | None]) -> PromptIO:
        shown.append(FakeIO("y"))
        return shown[-1]

    prompter_with(make).install(connection)
    _request(peer, 1, "inquiry/prompt", question())
    resolved = {"inquiryId": "c1.q.1", "conversationId": "c-1", "outcome": "answered"}
    peer.send({"jsonrpc": "2.0", "method": "inquiry/resolved", "params": resolved})
    # The same id again later (a later turn may reuse tool call ids): asked.
    _request(peer, 2, "inquiry/prompt", question())
    # Holding the first request until the resolution has been read, as it is when
    # the resolution arrives while a person looks at something else.
    note = connection.receive(timeout=10, hold_requests=True)
    assert note == Notification("inquiry/resolved", resolved)
    _receive_all(connection, peer)
    assert peer.read()["error"]["code"] == -32800
    assert peer.read()["result"] == {"answer": True, "remember": False}
    assert len(shown) == 1


class WaitingIO(FakeIO):
    """Shows the prompt, then waits (like the terminal) until `check` dismisses it."""

    def __init__(self, check: Callable[[], str | None], shown: threading.Event) -> None:
        super().__init__()
        self.check = check
        self.shown_event = shown

    def read_line(self, prompt: str, *, secret: bool = False) -> str:
        self.prompts.append(prompt)
        self.shown_event.set()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            reason = self.check()
            if reason:
                raise PromptDismissed(reason)
            time.sleep(0.01)
        raise AssertionError("never dismissed")


def test_prompt_answered_elsewhere_is_dismissed(connected: tuple[Connection, Peer]) -> None:
    connection, peer = connected
    shown = threading.Event()
    ios: list[WaitingIO] = []

    def make(check: Callable[[], str | None]) -> PromptIO:
        ios.append(WaitingIO(check, shown))
        return ios[-1]

    prompter_with(make).install(connection)
    _request(peer, 5, "tool/permission", permission())

    def elsewhere() -> None:
        shown.wait(10)
        resolved = {"inquiryId": "call_7.permission.run", "conversationId": "c-1"}
        peer.send(
            {
                "jsonrpc": "2.0",
                "method": "inquiry/resolved",
                "params": {**resolved, "outcome": "answered"},
            }
        )

    thread = threading.Thread(target=elsewhere)
    thread.start()
    _receive_all(connection, peer)
    thread.join()
    assert peer.read()["error"]["code"] == -32800
    assert ios[0].written == ["\njp: answered elsewhere\n"]


def test_on_message_sees_requests_while_receive_is_busy_and_requests_can_be_held(
    connected: tuple[Connection, Peer],
) -> None:
    connection, peer = connected
    seen: list[Any] = []
    connection.on_message("ping", seen.append)
    connection.on_request("ask", lambda params: params * 2)
    _request(peer, 1, "ask", 21)
    peer.send({"jsonrpc": "2.0", "method": "ping", "params": 1})
    assert connection.receive(timeout=10, hold_requests=True) == Notification("ping", 1)
    assert seen == [1]
    peer.send({"jsonrpc": "2.0", "method": "after"})
    assert connection.receive(timeout=10) == Notification("after", None)
    assert peer.read() == {"jsonrpc": "2.0", "id": 1, "result": 42}  # answered only now


def test_follower_pause_stops_the_spinner_and_ends_the_line() -> None:
    out, err = io.StringIO(), io.StringIO()
    follower = Follower(
        cast(Connection, None),
        Follow("c1", "t1"),
        renderer=TurnRenderer(out, err, out_tty=False, err_tty=True),
        spinner=Spinner(err, enabled=True),
        interrupts=Interrupts(),
    )
    follower.renderer.handle({"kind": "text_delta", "text": "Let me ask"})  # type: ignore[union-attr]
    follower.spinner.tick("running tools")
    follower.pause()
    assert err.getvalue().endswith("\r\x1b[K")  # the spinner line is erased
    assert out.getvalue() == "Let me ask\n"  # the prompt starts on a line of its own


# --- command line --------------------------------------------------------------------


def test_toggles_keep_command_line_order() -> None:
    args = build_parser().parse_args(["query", "-T", "-t", "echo", "-T", "ask_user", "hi"])
    assert args.tools == [
        {"enable": False},
        {"enable": True, "name": "echo"},
        {"enable": False, "name": "ask_user"},
    ]
    assert args.message == ["hi"]
    assert build_parser().parse_args(["query", "hi", "-t"]).tools == [{"enable": True}]
    assert build_parser().parse_args(["query", "hi"]).tools == []


def test_who_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("jpcli.tty.tty_available", lambda path="/dev/tty": True)
    parse = build_parser().parse_args
    assert _asks(parse(["query", "hi"])) and _asks(parse(["attach"]))
    assert not _asks(parse(["query", "--non-interactive", "hi"]))
    assert not _asks(parse(["query", "--detach", "hi"]))
    assert not _asks(parse(["attach", "--non-interactive"]))
    assert not _asks(parse(["inquiry", "ls"])) and not _asks(parse(["turn", "ls"]))
    monkeypatch.setattr("jpcli.tty.tty_available", lambda path="/dev/tty": False)
    assert not _asks(parse(["query", "-F", "json", "hi"]))  # no terminal: never
    assert CAPABILITIES == {
        "prompt": {
            "answerTypes": ["boolean", "select", "text", "secret", "number", "multi_select"]
        },
        "permission": True,
    }


def test_query_sends_toggles_and_declares_no_prompts_without_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "received.jsonl"
    monkeypatch.setenv("JPD_COMMAND", shlex.join([sys.executable, str(FAKE)]))
    monkeypatch.setenv("JP_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("FAKE_JPD_LOG", str(log))
    monkeypatch.setattr("jpcli.tty.tty_available", lambda path="/dev/tty": False)
    assert main(["query", "--new", "-T", "-t", "echo", "hi"]) == 0
    assert sent_params(log, "turn/start") == [
        {"message": "hi", "tools": [{"enable": False}, {"enable": True, "name": "echo"}]}
    ]
    assert sent_params(log, "initialize")[0]["capabilities"] == {}


def test_query_declares_prompts_with_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "received.jsonl"
    monkeypatch.setenv("JPD_COMMAND", shlex.join([sys.executable, str(FAKE)]))
    monkeypatch.setenv("JP_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("FAKE_JPD_LOG", str(log))
    monkeypatch.setattr("jpcli.tty.tty_available", lambda path="/dev/tty": True)
    assert main(["query", "--new", "hi"]) == 0
    assert sent_params(log, "initialize")[0]["capabilities"] == CAPABILITIES


# --- jp inquiry ----------------------------------------------------------------------


class Recording:
    """A connection stand-in that records requests and answers from a table."""

    def __init__(self, error: RpcError | None = None, listed: list[Any] | None = None) -> None:
        self.sent: list[tuple[str, Any]] = []
        self.error = error
        self.listed = listed or []

    def request(self, method: str, params: Any = None) -> Any:
        if method == "inquiry/list":  # what `jp inquiry answer` looks up first
            return {"inquiries": self.listed}
        self.sent.append((method, params))
        if self.error is not None:
            raise self.error
        return {"accepted": True}


@pytest.mark.parametrize(
    ("raw", "value"),
    [("true", True), ("false", False), ('"3"', "3"), ("3", 3), ("main", "main"), ("a b", "a b")],
)
def test_inquiry_answer_parses_json_else_string(raw: str, value: Any) -> None:
    fake = Recording()
    out, err = io.StringIO(), io.StringIO()
    assert inquiry_answer(cast(Connection, fake), "c1.q.1", raw, out=out, err=err) == 0
    assert fake.sent == [
        ("inquiry/answer", {"inquiryId": "c1.q.1", "answer": value, "remember": False})
    ]
    assert out.getvalue() == "answered c1.q.1\n"


def test_inquiry_answer_error_is_one_line() -> None:
    fake = Recording(RpcError(-32001, "no pending inquiry x (already answered, or never asked)"))
    out, err = io.StringIO(), io.StringIO()
    assert inquiry_answer(cast(Connection, fake), "x", "true", out=out, err=err) == 1
    assert err.getvalue() == "jp: no pending inquiry x (already answered, or never asked)\n"
    assert out.getvalue() == ""


SECRET_INQUIRY = {
    "inquiryId": "c1.token.1",
    "kind": "inquiry",
    "toolName": "deploy",
    "prompt": {"question": {"id": "token", "text": "Token?", "answerType": {"type": "secret"}}},
}


def test_inquiry_answer_refuses_a_secret_on_the_command_line() -> None:
    fake = Recording(listed=[SECRET_INQUIRY])
    out, err = io.StringIO(), io.StringIO()
    code = inquiry_answer(cast(Connection, fake), "c1.token.1", "hunter2", out=out, err=err)
    assert code == 2 and fake.sent == []
    assert "never taken from the command line" in err.getvalue()
    assert "hunter2" not in err.getvalue()


def test_inquiry_answer_reads_a_secret_from_stdin_as_typed() -> None:
    fake = Recording(listed=[SECRET_INQUIRY])
    out, err = io.StringIO(), io.StringIO()
    stdin = io.StringIO("true\n")  # a secret is sent as typed, never parsed as JSON
    code = inquiry_answer(cast(Connection, fake), "c1.token.1", None, out=out, err=err, stdin=stdin)
    assert code == 0
    assert fake.sent == [
        ("inquiry/answer", {"inquiryId": "c1.token.1", "answer": "true", "remember": False})
    ]


def test_inquiry_rows() -> None:
    asked = {
        "inquiryId": "c1.branch.1",
        "kind": "inquiry",
        "toolName": "git",
        "deferred": False,
        "askedAt": "not a time",
        "prompt": question("select", options=["main", "dev"]),
    }
    assert inquiry_row(asked) == (
        "c1.branch.1  git  Proceed? [select: main | dev]  being asked since not a time"
    )
    permission_row = {
        "inquiryId": "c2.permission.deliver",
        "kind": "permission",
        "toolName": "rm",
        "deferred": True,
        "askedAt": "x",
        "permission": permission("deliver"),
    }
    assert inquiry_row(permission_row) == (
        "c2.permission.deliver  rm  permission to deliver the result of rm "
        "(answer true or false)  deferred since x"
    )


def test_prompt_modules_import_only_the_standard_library() -> None:
    code = (
        "import sys\n"
        "import jpcli.prompter, jpcli.prompts, jpcli.tty, jpcli.inquiries\n"
        "banned = ['pydantic', 'httpx', 'pygls', 'jpd', 'anyio', 'platformdirs', 'rich']\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] in banned))\n"
    )
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert result.stdout == "[]\n"


def test_number_and_multi_select_parsing() -> None:
    from jpcli.prompts import parse_multi_select, parse_number

    assert parse_number("3", integer=True, minimum=1, maximum=5) == 3
    assert parse_number("2.5") == 2.5
    assert parse_number("", default=7) == 7
    with pytest.raises(ValueError, match="at most 5"):
        parse_number("9", maximum=5)
    with pytest.raises(ValueError, match="whole number"):
        parse_number("2.5", integer=True)
    options = ["red", "green", "blue"]
    assert parse_multi_select("3, 1", options) == ["blue", "red"]
    assert parse_multi_select("green blue green", options) == ["green", "blue"]
    assert parse_multi_select("", options, default=["red"]) == ["red"]
    with pytest.raises(ValueError, match="at least 2"):
        parse_multi_select("1", options, min_items=2)
    with pytest.raises(ValueError, match="number from 1 to 3"):
        parse_multi_select("7", options)


def test_a_choice_ending_in_bang_is_remembered_when_allowed() -> None:
    from jpcli.prompts import Prompts

    class Lines:
        def __init__(self, *lines: str) -> None:
            self.lines = list(lines)

        def write(self, text: str) -> None:
            pass

        def read_line(self, prompt: str, *, secret: bool = False) -> str:
            return self.lines.pop(0)

    def ask(persistence: str, line: str) -> Any:
        params = {
            "toolName": "t",
            "question": {
                "id": "q",
                "text": "Branch?",
                "answerType": {"type": "select", "options": ["main", "dev"]},
                "persistence": persistence,
            },
        }
        return Prompts(Lines(line), color=False).inquiry(params)

    assert ask("turn", "2!") == {"answer": "dev", "remember": True}
    assert ask("turn", "2") == {"answer": "dev", "remember": False}
    with pytest.raises(IndexError):  # "2!" is not a choice when it cannot be remembered
        ask("none", "2!")
