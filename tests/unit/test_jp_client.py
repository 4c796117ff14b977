"""Tests of the `jp` thin client against a fake daemon (tests/fixtures/fake_jpd.py)."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

import pytest
from jpcli import rpc
from jpcli.__main__ import main
from jpcli.overrides import parse_config_overrides, parse_value, split_key
from jpcli.render import DIM, TurnRenderer, format_tool_call
from jpcli.rpc import (
    Connection,
    ConnectionClosed,
    Notification,
    RpcError,
    encode_message,
    read_message,
    write_message,
)
from jpcli.spawn import daemon_command
from jpcli.stdio_daemon import wait_exit

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "fixtures" / "fake_jpd.py"
UNICODE = "wörld ✓ — 日本 🎉"


# --- framing -----------------------------------------------------------------------


class ChunkedRaw(io.RawIOBase):
    """A raw stream returning at most `size` bytes per read (splits frames anywhere)."""

    def __init__(self, data: bytes, size: int) -> None:
        self._data = data
        self._size = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        chunk = self._data[: min(self._size, len(buffer))]
        self._data = self._data[len(chunk) :]
        buffer[: len(chunk)] = chunk
        return len(chunk)


def test_frame_counts_utf8_bytes_and_round_trips() -> None:
    message = {"jsonrpc": "2.0", "method": "x", "params": {"text": UNICODE}}
    data = encode_message(message)
    header, body = data.split(b"\r\n\r\n", 1)
    assert header == b"Content-Length: %d" % len(body)
    assert len(body) > len(json.dumps(message, ensure_ascii=False))  # bytes, not characters
    assert read_message(io.BytesIO(data)) == message


@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_frames_survive_split_reads(size: int) -> None:
    messages = [{"id": i, "result": f"{UNICODE} {i}"} for i in range(3)]
    # Unbuffered on purpose: every read is short, so the body needs several reads.
    raw = ChunkedRaw(b"".join(encode_message(m) for m in messages), size)
    stream = cast(IO[bytes], raw)
    assert [read_message(stream) for _ in range(3)] == messages
    assert read_message(stream) is None


def test_extra_headers_and_bare_newlines_are_tolerated() -> None:
    body = json.dumps({"id": 1, "result": True}).encode()
    data = b"Content-Type: application/json\nContent-Length: %d\n\n" % len(body) + body
    assert read_message(io.BytesIO(data)) == {"id": 1, "result": True}


@pytest.mark.parametrize(
    "data",
    [
        b"Content-Length: 10\r\n\r\n{}",  # truncated body
        b"Content-Length: 5\r\n",  # end inside headers
        b"Content-Type: x\r\n\r\n{}",  # no length
        b"Content-Length: abc\r\n\r\n",
        b"Content-Length: 2\r\n\r\n[]",  # not an object
        b"Content-Length: 3\r\n\r\n{x}",  # not JSON
        b"Content-Length: 2\r\n\r\n\xff\xfe",  # not UTF-8
    ],
)
def test_malformed_frames_close_the_connection(data: bytes) -> None:
    with pytest.raises(ConnectionClosed):
        read_message(io.BytesIO(data))


# --- connection --------------------------------------------------------------------


class Peer:
    """The server end of a socket pair, speaking raw frames."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = sock.makefile("rb")
        self.writer = sock.makefile("wb")

    def read(self) -> dict[str, Any]:
        message = read_message(self.reader)
        assert message is not None
        return message

    def send(self, message: dict[str, Any]) -> None:
        write_message(self.writer, message)

    def close(self) -> None:
        self.writer.close()
        self.reader.close()
        self.sock.close()


@pytest.fixture
def pair() -> Iterator[tuple[Connection, Peer]]:
    client_sock, server_sock = socket.socketpair()
    connection = Connection(client_sock.makefile("rb"), client_sock.makefile("wb"))
    peer = Peer(server_sock)
    yield connection, peer
    connection.close()
    peer.close()
    client_sock.close()


def _respond_in_thread(peer: Peer, make: Any) -> threading.Thread:
    def serve() -> None:
        request = peer.read()
        peer.send({"jsonrpc": "2.0", "id": request["id"], **make(request)})

    thread = threading.Thread(target=serve)
    thread.start()
    return thread


def test_request_returns_result(pair: tuple[Connection, Peer]) -> None:
    connection, peer = pair
    thread = _respond_in_thread(peer, lambda r: {"result": {"echo": r["params"]}})
    assert connection.request("x/y", {"text": UNICODE}) == {"echo": {"text": UNICODE}}
    thread.join()


def test_answer_followed_by_hang_up_is_still_the_result(
    pair: tuple[Connection, Peer], monkeypatch: pytest.MonkeyPatch
) -> None:
    connection, peer = pair
    reader_done = threading.Event()
    real_put = connection._inbox.put

    def put(item: object) -> None:  # the reader's last act, after failing open requests
        real_put(item)
        reader_done.set()

    monkeypatch.setattr(connection._inbox, "put", put)

    def answer_then_hang_up() -> None:
        request = peer.read()
        peer.send({"jsonrpc": "2.0", "id": request["id"], "result": {"stopping": True}})
        peer.close()

    class LateEvent(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            # The caller wakes only after the reader has seen the end of the stream.
            reader_done.wait(5)
            return super().wait(timeout)

    class LatePending(rpc._Pending):
        def __init__(self) -> None:
            super().__init__()
            self.done = LateEvent()

    monkeypatch.setattr(rpc, "_Pending", LatePending)
    thread = threading.Thread(target=answer_then_hang_up)
    thread.start()
    assert connection.request("daemon/stop") == {"stopping": True}
    thread.join()


def test_error_response_raises_rpc_error(pair: tuple[Connection, Peer]) -> None:
    connection, peer = pair
    error = {"code": -32602, "message": "invalid params", "data": [{"loc": ["message"]}]}
    thread = _respond_in_thread(peer, lambda r: {"error": error})
    with pytest.raises(RpcError) as info:
        connection.request("turn/start", {})
    thread.join()
    assert (info.value.code, info.value.message) == (-32602, "invalid params")
    assert info.value.data == [{"loc": ["message"]}]


def test_responses_out_of_order_reach_their_callers(pair: tuple[Connection, Peer]) -> None:
    connection, peer = pair
    results: dict[str, Any] = {}
    threads = [
        threading.Thread(target=lambda n=n: results.__setitem__(n, connection.request(n)))
        for n in ("a", "b")
    ]
    for thread in threads:
        thread.start()
    requests = [peer.read(), peer.read()]
    for request in reversed(requests):
        peer.send({"jsonrpc": "2.0", "id": request["id"], "result": request["method"] * 2})
    for thread in threads:
        thread.join()
    assert results == {"a": "aa", "b": "bb"}


def test_notifications_are_received_in_order(pair: tuple[Connection, Peer]) -> None:
    connection, peer = pair
    for n in range(3):
        peer.send({"jsonrpc": "2.0", "method": "turn/event", "params": {"seq": n}})
    received = [connection.receive(timeout=10) for _ in range(3)]
    assert received == [Notification("turn/event", {"seq": n}) for n in range(3)]
    assert connection.receive(timeout=0.01) is None


def test_server_request_with_handler_is_answered_in_receive(
    pair: tuple[Connection, Peer],
) -> None:
    connection, peer = pair
    connection.on_request("inquiry/prompt", lambda params: {"answer": params["q"] * 2})
    peer.send({"jsonrpc": "2.0", "id": "s1", "method": "inquiry/prompt", "params": {"q": 21}})
    peer.send({"jsonrpc": "2.0", "method": "after", "params": None})
    assert connection.receive(timeout=10) == Notification("after", None)
    assert peer.read() == {"jsonrpc": "2.0", "id": "s1", "result": {"answer": 42}}


def test_server_request_handler_errors_are_mapped(pair: tuple[Connection, Peer]) -> None:
    connection, peer = pair

    def refuse(params: Any) -> Any:
        raise RpcError(-32800, "request cancelled", {"why": "user"})

    def crash(params: Any) -> Any:
        raise ValueError("boom")

    connection.on_request("refuse", refuse)
    connection.on_request("crash", crash)
    peer.send({"jsonrpc": "2.0", "id": 1, "method": "refuse"})
    peer.send({"jsonrpc": "2.0", "id": 2, "method": "crash"})
    peer.send({"jsonrpc": "2.0", "method": "done"})
    assert connection.receive(timeout=10) == Notification("done", None)
    assert peer.read()["error"] == {
        "code": -32800,
        "message": "request cancelled",
        "data": {"why": "user"},
    }
    assert peer.read()["error"] == {"code": -32603, "message": "boom"}


def test_unhandled_server_request_gets_method_not_found(pair: tuple[Connection, Peer]) -> None:
    _, peer = pair
    peer.send({"jsonrpc": "2.0", "id": 7, "method": "tool/permission", "params": {}})
    # Answered by the reader thread: no receive() needed.
    response = peer.read()
    assert response["id"] == 7 and response["error"]["code"] == -32601


def test_peer_going_away_fails_pending_request_and_receive(
    pair: tuple[Connection, Peer],
) -> None:
    connection, peer = pair

    def serve() -> None:
        peer.read()
        peer.send({"jsonrpc": "2.0", "method": "last", "params": 1})
        peer.close()

    thread = threading.Thread(target=serve)
    thread.start()
    with pytest.raises(ConnectionClosed):
        connection.request("never/answered")
    thread.join()
    # What came before the end is still delivered, then the end, repeatedly.
    assert connection.receive(timeout=10) == Notification("last", 1)
    for _ in range(2):
        with pytest.raises(ConnectionClosed):
            connection.receive(timeout=10)
    with pytest.raises(ConnectionClosed):
        connection.request("after/close")


# --- config overrides and daemon command --------------------------------------------


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("true", True),
        ("3", 3),
        ("1.5", 1.5),
        ('"quoted"', "quoted"),
        ("[1, 2]", [1, 2]),
        ('{"a": 1}', {"a": 1}),
        ("null", None),
        ("gpt-4o", "gpt-4o"),
        ("", ""),
        ("NaN", "NaN"),
        ("hello world", "hello world"),
    ],
)
def test_parse_value(raw: str, value: Any) -> None:
    assert parse_value(raw) == value


def test_parse_config_overrides_nests_and_later_wins() -> None:
    assert parse_config_overrides(
        [
            "assistant.model.id=anthropic/claude",
            "assistant.model.parameters.max_tokens=100",
            "assistant.model.parameters.max_tokens=200",
            "conversation.tools.'*'.detached=deny",
            'a.b="x=y"',
            "a.b.c=1",  # replaces the string with a table
            "z=1",
            'z={"k": true}',
        ]
    ) == {
        "assistant": {"model": {"id": "anthropic/claude", "parameters": {"max_tokens": 200}}},
        "conversation": {"tools": {"*": {"detached": "deny"}}},
        "a": {"b": {"c": 1}},
        "z": {"k": True},
    }
    assert parse_config_overrides(["a.b=1", "a=2"]) == {"a": 2}
    assert split_key('x."a.b".y') == ["x", "a.b", "y"]


@pytest.mark.parametrize("item", ["novalue", "=1", "a..b=1", "a.=1", "'unclosed=1", " =1"])
def test_parse_config_overrides_rejects_bad_items(item: str) -> None:
    with pytest.raises(ValueError):
        parse_config_overrides([item])


def test_daemon_command_default_and_override() -> None:
    assert daemon_command({}) == [sys.executable, "-m", "jpd"]
    assert daemon_command({"JPD_COMMAND": "  "}) == [sys.executable, "-m", "jpd"]
    assert daemon_command({"JPD_COMMAND": "py 'my dir/fake.py' --x"}) == [
        "py",
        "my dir/fake.py",
        "--x",
    ]


def test_wait_exit_reaps_an_ended_child_and_gives_up_on_a_running_one() -> None:
    quick = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    assert wait_exit(quick, 30.0) is True
    assert quick.returncode == 3
    assert wait_exit(quick, 30.0) is True  # already reaped: still ended
    stuck = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert wait_exit(stuck, 0.05) is False
        assert stuck.returncode is None
    finally:
        stuck.kill()
        stuck.wait()


# --- start-up imports --------------------------------------------------------------


def test_startup_path_imports_only_the_standard_library() -> None:
    code = (
        "import sys\n"
        "import jpcli.__main__\nimport jpcli.parser as m\n"
        "m.build_parser().parse_args(['query', '-c', 'a=1', '-m', 'x/y', 'hi'])\n"
        "m.build_parser().parse_args(['conversation', 'ls'])\n"
        "m.build_parser().parse_args(['acp'])\n"
        "m.build_parser().parse_args(['chat', '--new'])\n"
        "banned = ['pydantic', 'httpx', 'pygls', 'jpd', 'llama_cpp', 'anyio', 'platformdirs',\n"
        "          'acp', 'prompt_toolkit']\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] in banned))\n"
        "import jpcli.commands, jpcli.daemon, jpcli.rpc\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] in banned))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    # Neither parsing nor the whole client pulls in third-party packages (or the daemon).
    assert result.stdout.splitlines() == ["[]", "[]"]


def test_help_and_version_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "query" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("jp ")


def test_one_version_everywhere() -> None:
    """`jp` may not import `jpd`, so it carries a copy of the version: the same one the
    daemon reports and the installed distribution has."""
    import importlib.metadata

    import jpcli

    import jpd

    assert jpcli.__version__ == jpd.__version__ == importlib.metadata.version("jpd")


# --- commands against the fake daemon -----------------------------------------------


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point `jp` at the fake daemon; returns the file logging what it received."""
    log = tmp_path / "received.jsonl"
    monkeypatch.setenv("JPD_COMMAND", shlex.join([sys.executable, str(FAKE)]))
    monkeypatch.setenv("JP_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("FAKE_JPD_LOG", str(log))
    monkeypatch.delenv("FAKE_JPD_EMPTY", raising=False)
    monkeypatch.delenv("FAKE_JPD_DIE_ON_INIT", raising=False)
    return log


def received(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def sent_params(log: Path, method: str) -> list[Any]:
    """Params of each `method` sent, without the client environment (checked on its own)."""
    params = [m.get("params") for m in received(log) if m.get("method") == method]
    return [{k: v for k, v in p.items() if k != "environment"} for p in params]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_query_streams_text_and_shuts_down(fake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["conversation", "use", "c-n"], capsys)[0] == 0  # a unique prefix
    fake.unlink()
    code, out, err = run(["query", "hello", "there"], capsys)
    assert (code, out, err) == (0, "Hello, wörld ✓ — 日本\n", "")
    messages = received(fake)
    initialize = messages[0]["params"]
    assert initialize["clientInfo"]["name"] == "jp"
    assert initialize["workspaceRoot"] == os.getcwd()
    assert [m.get("method") for m in messages[-2:]] == ["shutdown", "exit"]
    # continues this workspace's conversation, message words joined
    assert sent_params(fake, "turn/start") == [
        {"message": "hello there", "conversationId": "c-new"}
    ]
    # The turn runs with this process's environment and working directory.
    started = [m["params"] for m in messages if m.get("method") == "turn/start"]
    mask = os.umask(0o022)
    os.umask(mask)
    assert started[0]["environment"] == {
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "umask": mask,  # what tools create gets this shell's umask
    }


def test_query_new_or_no_conversation_starts_fresh(
    fake: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run(["query", "--new", "hi"], capsys)[0] == 0
    monkeypatch.setenv("FAKE_JPD_EMPTY", "1")
    assert run(["query", "hi"], capsys)[0] == 0
    assert sent_params(fake, "turn/start") == [{"message": "hi"}, {"message": "hi"}]


def test_query_sends_model_and_config(fake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["query", "--new", "-m", "test/m", "-c", "a.b=1", "-c", "a.c=x", "-c", "a.b=[2]", "echo"],
        capsys,
    )
    assert code == 0
    echoed = json.loads(out)
    assert echoed.pop("environment")["cwd"] == os.getcwd()
    assert echoed == {
        "message": "echo",
        "model": "test/m",
        "config": {"a": {"b": [2], "c": "x"}},
    }


def test_query_sends_the_permission_mode(fake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["query", "--new", "--mode", "read-only", "hi"], capsys)[0] == 0
    assert sent_params(fake, "turn/start") == [{"message": "hi", "mode": "read-only"}]
    code, _, err = run(["query", "--mode", "yolo", "hi"], capsys)
    assert code == 2 and "invalid choice: 'yolo'" in err


def test_query_sends_images(fake: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    picture = tmp_path / "shot.PNG"
    picture.write_bytes(b"\x89PNG pixels")
    assert run(["query", "--new", "--image", str(picture), "what is it"], capsys)[0] == 0
    (sent,) = sent_params(fake, "turn/start")
    assert sent["images"] == [{"mimeType": "image/png", "data": "iVBORyBwaXhlbHM="}]
    code, _, err = run(["query", "--image", str(tmp_path / "notes.txt"), "hi"], capsys)
    assert code == 2 and "not a png, jpeg, gif or webp file" in err
    code, _, err = run(["query", "--image", str(tmp_path / "gone.png"), "hi"], capsys)
    assert code == 2 and "No such file" in err


def test_query_reads_message_from_stdin(
    fake: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("echo from\nstdin"))
    code, out, _ = run(["query", "--new"], capsys)
    assert code == 0 and json.loads(out)["message"] == "echo from\nstdin"


@pytest.mark.parametrize(
    "argv",
    [
        ["query"],
        ["query", "-c", "novalue", "hi"],
        ["query", "-c", "a..b=1", "hi"],
        [],
        ["bogus"],
        ["conversation"],
    ],
)
def test_usage_errors_exit_2_without_starting_the_daemon(
    argv: list[str], fake: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code, out, err = run(argv, capsys)
    assert code == 2 and out == "" and "usage:" in err
    assert not fake.exists()


def test_events_of_other_turns_are_ignored(fake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["query", "other"], capsys)
    assert code == 0 and "NOT MINE" not in out and out.endswith("日本\n")


@pytest.mark.parametrize(
    ("reason", "exit_code"),
    [("end_turn", 0), ("max_tokens", 0), ("error", 1), ("cancelled", 130)],
)
def test_stop_reasons_map_to_exit_codes(
    reason: str, exit_code: int, fake: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["query", f"stop:{reason}"], capsys)
    assert (code, out) == (exit_code, "partial\n")
    if reason == "error":
        # A failed turn in a new conversation is not silently continued next time.
        assert err == (
            "jp: error: provider exploded second line\n"
            "jp: the turn failed; the next `jp query` starts a new conversation "
            "(continue this one with --conversation c-fresh)\n"
        )
    if reason in ("end_turn", "cancelled"):
        assert err == ""


def test_tool_calls_go_to_stderr_and_reasoning_is_omitted_off_tty(
    fake: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["query", "tools"], capsys)
    assert (code, out) == (0, "done\n")
    call, result = err.splitlines()
    assert call == '⚙ read_file(path="a.txt")'
    assert re.fullmatch(r"✗ read_file\(path=\"a.txt\"\) \d+\.\ds: no such file", result), result
    assert "thinking" not in err


def test_turn_start_error_prints_message(fake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["query", "reject"], capsys)
    assert (code, out) == (1, "")
    assert err == "jp: config error: assistant.model in /x/config.toml: bad value\n"


def test_unanswerable_server_request_gets_method_not_found(
    fake: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --non-interactive: no prompt handlers even when the tests run in a terminal.
    assert run(["query", "--non-interactive", "ask"], capsys)[:2] == (0, "client said -32601\n")


def test_daemon_dying_mid_turn_is_one_line(fake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["query", "die"], capsys)
    assert (code, out) == (1, "last words\n")
    assert err.startswith("jp: error: daemon exited unexpectedly (exit code 3); see ")
    assert len(err.splitlines()) == 1


def test_daemon_dying_on_initialize_is_one_line(
    fake: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FAKE_JPD_DIE_ON_INIT", "1")
    code, out, err = run(["conversation", "ls"], capsys)
    assert (code, out) == (1, "")
    assert err.startswith("jp: error: daemon exited unexpectedly (exit code 2)")
    # the daemon's stderr went to the log file, not to ours
    assert "dying on initialize" in (tmp_path / "logs" / "jpd.log").read_text()


def test_daemon_that_cannot_start(
    fake: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("JPD_COMMAND", str(tmp_path / "no-such-jpd"))
    code, _, err = run(["conversation", "ls"], capsys)
    assert code == 1 and err.startswith("jp: error: cannot start daemon")


def test_conversation_ls(fake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["conversation", "use", "c-o"], capsys)[0] == 0
    code, out, _ = run(["conversation", "ls"], capsys)
    header, *lines = out.splitlines()
    assert code == 0 and len(lines) == 2
    assert header.split() == ["ID", "UPDATED", "EVENTS", "TITLE"]
    assert lines[0].startswith(" c-new  ") and lines[0].endswith(
        "     7  Latest chat with two lines"
    )
    assert lines[1].startswith("*c-old  ") and lines[1].endswith("Older")  # this workspace's


def test_conversation_show(fake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["conversation", "show", "c-new"], capsys)
    assert code == 0
    for expected in (
        "── turn t1 · test/x",
        "user:\n  Read a.txt please",
        "assistant (reasoning):\n  I should read",
        '⚙ read_file(path="a.txt")  [call_1]',
        "? inquiry call_1.confirm.1 from tool read_file [select: yes | no]\n  Read the whole file?",
        'inquiry call_1.confirm.1: answered "yes"',
        "tool result [call_1]:\n  line one\n  line two",
        "assistant:\n  It says hi.",
        "── end of turn (end_turn)",
        '[future_thing] {"x": 1}',
    ):
        assert expected in out


@pytest.mark.parametrize("action", ["show", "rm"])
def test_unknown_conversation(action: str, fake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["conversation", action, "nope"], capsys)
    assert (code, out, err) == (1, "", "jp: conversation not found: nope\n")


def test_conversation_rm(fake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["conversation", "rm", "c-new"], capsys) == (0, "", "")
    assert sent_params(fake, "conversation/delete") == [{"conversationId": "c-new"}]


# --- Ctrl-C ------------------------------------------------------------------------


def _start_jp(fake: Path, script: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "jpcli", "query", script],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=os.environ.copy(),
    )
    assert process.stdout is not None
    assert process.stdout.read(5) == b"tick "  # the turn is streaming
    return process


def test_ctrl_c_cancels_the_turn(fake: Path) -> None:
    process = _start_jp(fake, "slow")
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert out.endswith(b"\n")
    assert err.decode() == "jp: cancelling (Ctrl-C again to quit now)\n"
    assert sent_params(fake, "turn/cancel") == [{"turnId": "t-1"}]
    assert [m.get("method") for m in received(fake)[-2:]] == ["shutdown", "exit"]


def test_second_ctrl_c_exits_at_once(fake: Path) -> None:
    process = _start_jp(fake, "stubborn")
    process.send_signal(signal.SIGINT)
    assert process.stderr is not None
    assert process.stderr.readline() == b"jp: cancelling (Ctrl-C again to quit now)\n"
    # The fake ignores turn/cancel; once it has it, the turn is still streaming.
    deadline = time.monotonic() + 60
    while not sent_params(fake, "turn/cancel") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sent_params(fake, "turn/cancel") == [{"turnId": "t-1"}]
    assert process.poll() is None
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert b"Traceback" not in err


# --- rendering ---------------------------------------------------------------------


def test_renderer_on_a_terminal_dims_reasoning_and_keeps_lines_apart() -> None:
    out, err = io.StringIO(), io.StringIO()
    renderer = TurnRenderer(out, err, out_tty=True, err_tty=True)
    renderer.handle({"kind": "reasoning_delta", "text": "hmm"})
    renderer.handle({"kind": "text_delta", "text": "Answer"})
    renderer.handle({"kind": "tool_call", "id": "1", "name": "ls", "arguments": {}})
    renderer.handle({"kind": "text_delta", "text": " more"})
    renderer.finish()
    assert out.getvalue() == "Answer more\n"
    assert err.getvalue() == f"{DIM}hmm\x1b[0m\n\n⚙ ls()\n"


def test_format_tool_call_is_one_short_line() -> None:
    line = format_tool_call("write", {"path": "x", "content": "a\nb" * 100})
    assert line.startswith('⚙ write(path="x", content="a\\nb') and line.endswith("…)")
    assert len(line) < 100 and "\n" not in line


def test_query_sends_piped_input_after_the_message(
    fake: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("-old\n+new\n"))
    code, out, _ = run(["query", "--new", "echo", "review"], capsys)
    assert code == 0
    assert json.loads(out)["message"] == "echo review\n\n<stdin>\n-old\n+new\n</stdin>"


def test_query_refuses_piped_input_over_the_limit(
    fake: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JP_STDIN_LIMIT", "10")
    monkeypatch.setattr(sys, "stdin", io.StringIO("x" * 11))
    code, out, err = run(["query", "--new", "review"], capsys)
    assert code == 2 and out == ""
    assert "piped input is larger than 10 bytes" in err
    assert not sent_params(fake, "turn/start") if fake.exists() else True


def test_query_system_prompt_is_a_config_override(
    fake: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["query", "--new", "-s", "Be terse.", "-c", "assistant.x=1", "echo"], capsys)
    assert code == 0
    assert json.loads(out)["config"] == {"assistant": {"x": 1, "system_prompt": "Be terse."}}


def test_every_command_help_carries_examples() -> None:
    import argparse

    from jpcli.parser import build_parser

    def walk(parser: argparse.ArgumentParser) -> list[str]:
        missing = [] if (parser.epilog or "").startswith("examples:") else [parser.prog]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in set(action.choices.values()):
                    missing += walk(sub)
        return missing

    assert walk(build_parser()) == []


def test_conversation_show_renders_a_forced_tool_retry() -> None:
    from jpcli.conversations.event_lines import format_persisted_event

    text = format_persisted_event(
        {"type": "forced_tool_retry", "tool": "echo", "message": "Call it now."}
    )
    assert text.splitlines()[0] == "retry without reasoning (`echo` was forced but not called):"
    assert "Call it now." in text
    assert "a tool was forced" in format_persisted_event(
        {"type": "forced_tool_retry", "message": "Call it now."}
    )


def test_jp_notes_a_forced_tool_retry_and_keeps_the_streamed_text() -> None:
    out, err = io.StringIO(), io.StringIO()
    renderer = TurnRenderer(out, err, out_tty=False, err_tty=False)
    renderer.handle({"kind": "text_delta", "text": "I would rather not."})
    renderer.handle({"kind": "forced_tool_retry", "tool": "echo", "message": "Call it now."})
    assert out.getvalue() == "I would rather not."
    assert "`echo` was forced but not called; asking again without reasoning" in err.getvalue()


def test_jp_shows_the_models_plan_as_a_checklist() -> None:
    out, err = io.StringIO(), io.StringIO()
    renderer = TurnRenderer(out, err, out_tty=False, err_tty=False)
    plan = [
        {"step": "read", "status": "completed"},
        {"step": "fix", "status": "in_progress"},
        {"step": "test", "status": "pending"},
    ]
    renderer.handle(
        {"kind": "tool_call", "id": "p", "name": "update_plan", "arguments": {"plan": plan}}
    )
    assert err.getvalue() == "Plan:\n  [x] read\n  [>] fix\n  [ ] test\n"
    bad = {"plan": [{"step": "x", "status": "done"}]}
    renderer.handle({"kind": "tool_call", "id": "q", "name": "update_plan", "arguments": bad})
    assert err.getvalue().endswith(format_tool_call("update_plan", bad) + "\n")
