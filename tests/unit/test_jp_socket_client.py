"""The `jp` client's socket mode: paths agree with the daemon's, markdown blocks, the
spinner, the follower's dedupe, and commands that need no daemon."""

from __future__ import annotations

import io
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from jpcli import paths
from jpcli.__main__ import main
from jpcli.daemon import NotRunning, SocketDaemon
from jpcli.follow import Follow, Follower, Interrupts, JsonLines
from jpcli.markdown import MarkdownRenderer, split_blocks
from jpcli.render import TurnRenderer
from jpcli.rpc import Connection, Notification
from jpcli.terminal import Spinner

from jpd.rpc.socket_claim import pid_path

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "fixtures" / "fake_jpd.py"


# --- paths (compared with platformdirs in test_jp_paths.py) -----------------------------


def test_socket_and_log_overrides() -> None:
    assert paths.socket_path({"JP_SOCKET": "/s/x.sock"}) == "/s/x.sock"
    assert paths.socket_path({}).endswith("/jp/jpd.sock")
    assert paths.log_file({"JP_LOG_DIR": "/l"}) == "/l/jpd.log"


@pytest.mark.parametrize("name", ["/r/jpd.sock", "/r/sock", "/r/x.pid", "/r/.h", "/r/b.", "a.b.c"])
def test_pid_file_is_where_jpd_writes_it(name: str) -> None:
    assert paths.pid_file(name) == str(pid_path(Path(name)))


# --- markdown ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "blocks", "rest"),
    [
        ("one para", [], "one para"),
        ("one\n\ntwo", ["one"], "two"),
        ("a\nb\n\n\n\nc\n", ["a\nb"], "c\n"),
        ("```py\nx = 1\n\ny = 2\n", [], "```py\nx = 1\n\ny = 2\n"),  # blank line inside a fence
        ("```py\nx\n```\nafter", ["```py\nx\n```"], "after"),
        ("~~~~\n```\n~~~~\n\nz", ["~~~~\n```\n~~~~"], "z"),  # a shorter fence does not close
        ("- a\n- b\n\n", ["- a\n- b"], ""),
    ],
)
def test_split_blocks(text: str, blocks: list[str], rest: str) -> None:
    assert split_blocks(text) == (blocks, rest)


def test_markdown_renderer_renders_blocks_and_keeps_notes_on_stderr() -> None:
    out, err = io.StringIO(), io.StringIO()
    renderer = MarkdownRenderer(out, err, err_tty=False)
    for piece in ["# Ti", "tle\n\nSome **bo", "ld** words\n", "\n- a\n- b"]:
        renderer.handle({"kind": "text_delta", "text": piece})
    renderer.handle({"kind": "tool_call", "id": "1", "name": "ls", "arguments": {}})
    renderer.handle({"kind": "text_delta", "text": "after"})
    renderer.finish()
    lines = [line.strip() for line in out.getvalue().splitlines()]
    assert lines == ["Title", "", "Some bold words", "", "• a", "• b", "", "after"]
    assert err.getvalue() == "⚙ ls()\n"


def test_plain_renderer_without_colour_does_not_dim() -> None:
    out, err = io.StringIO(), io.StringIO()
    renderer = TurnRenderer(out, err, out_tty=True, err_tty=True, color=False)
    renderer.handle({"kind": "reasoning_delta", "text": "hmm"})
    renderer.finish()
    assert err.getvalue() == "hmm\n"


# --- spinner -----------------------------------------------------------------------------


def test_spinner_draws_and_erases_only_when_enabled() -> None:
    stream = io.StringIO()
    spinner = Spinner(stream, enabled=True)
    spinner.tick("thinking")
    assert stream.getvalue().startswith("\r") and "thinking" in stream.getvalue()
    spinner.clear()
    assert stream.getvalue().endswith("\r\x1b[K")
    spinner.clear()  # nothing shown: nothing written
    quiet = io.StringIO()
    Spinner(quiet, enabled=False).tick("thinking")
    assert quiet.getvalue() == ""


# --- the follower ------------------------------------------------------------------------


def _event(
    seq: int, kind: str, turn: str = "t1", conversation: str = "c1", **fields: Any
) -> Notification:
    params = {
        "conversationId": conversation,
        "turnId": turn,
        "seq": seq,
        "event": {"kind": kind, **fields},
    }
    return Notification("turn/event", params)


def test_follower_drops_duplicates_and_other_conversations() -> None:
    backlog = [
        _event(1, "turn_started", model="m"),
        _event(2, "text_delta", text="a"),
        _event(2, "text_delta", text="a"),  # replayed again
        _event(1, "text_delta", conversation="c2", text="other conversation"),
        _event(3, "text_delta", turn="t0", text="other turn"),
        _event(4, "text_delta", text="b"),
        _event(5, "turn_completed", stopReason="end_turn"),
        _event(6, "text_delta", text="after the end"),
    ]
    out = io.StringIO()
    follower = Follower(
        cast(Connection, None),  # never read: the whole turn is in the backlog
        Follow("c1", "t1", live=False),
        json_lines=JsonLines(out, io.StringIO()),
        spinner=Spinner(io.StringIO(), enabled=False),
        interrupts=Interrupts(),
    )
    assert follower.run(backlog) == 0
    assert [json.loads(line)["seq"] for line in out.getvalue().splitlines()] == [1, 2, 4, 5]


@pytest.mark.parametrize(("reason", "code"), [("end_turn", 0), ("error", 1), ("cancelled", 130)])
def test_follower_all_turns_and_exit_codes(reason: str, code: int) -> None:
    out = io.StringIO()
    follower = Follower(
        cast(Connection, None),
        Follow("c1", "t1", all_turns=True, live=False),
        renderer=TurnRenderer(out, io.StringIO(), out_tty=False, err_tty=False),
        spinner=Spinner(io.StringIO(), enabled=False),
        interrupts=Interrupts(),
    )
    backlog = [
        _event(1, "text_delta", turn="t0", text="before "),
        _event(2, "text_delta", text="now"),
        _event(3, "turn_completed", stopReason=reason),
    ]
    assert follower.run(backlog) == code
    assert out.getvalue() == "before now\n"


class _AttachRecorder:
    """Stands for the connection: records the re-attach a lagging follower sends."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, Any]] = []

    def request(self, method: str, params: Any = None, timeout: float | None = None) -> Any:
        self.requests.append((method, params))
        return {}


def test_a_lagging_follower_reattaches_from_the_seq_it_is_given() -> None:
    connection = _AttachRecorder()
    out = io.StringIO()
    follower = Follower(
        cast(Connection, connection),
        Follow("c1", "t1", live=False),
        json_lines=JsonLines(out, io.StringIO()),
        spinner=Spinner(io.StringIO(), enabled=False),
        interrupts=Interrupts(),
    )
    backlog = [
        _event(1, "text_delta", text="a"),
        Notification("turn/lagged", {"conversationId": "c2", "fromSeq": 9}),  # not ours
        Notification("turn/lagged", {"conversationId": "c1", "fromSeq": 1}),
        _event(2, "text_delta", text="b"),
        _event(3, "turn_completed", stopReason="end_turn"),
    ]
    assert follower.run(backlog) == 0
    assert connection.requests == [("turn/attach", {"conversationId": "c1", "fromSeq": 1})]
    assert [json.loads(line)["seq"] for line in out.getvalue().splitlines()] == [1, 2, 3]


# --- commands without a daemon -----------------------------------------------------------


@pytest.fixture
def no_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("JPD_COMMAND", raising=False)
    monkeypatch.setenv("JP_SOCKET", str(tmp_path / "jpd.sock"))
    monkeypatch.setenv("JP_LOG_DIR", str(tmp_path / "logs"))
    return tmp_path


def test_daemon_commands_never_start_a_daemon(
    no_daemon: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["daemon", "status"]) == 3
    assert (
        capsys.readouterr().err
        == f"jp: jpd is not running (no daemon on {no_daemon / 'jpd.sock'})\n"
    )
    assert main(["daemon", "stop"]) == 0
    assert capsys.readouterr().err == "jp: jpd is not running\n"
    assert not (no_daemon / "logs").exists()  # nothing was started
    with pytest.raises(NotRunning):
        SocketDaemon(autostart=False).start()


def test_detach_needs_the_shared_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JPD_COMMAND", "true")
    assert main(["query", "--detach", "hi"]) == 2
    assert "--detach needs the shared daemon" in capsys.readouterr().err


def test_non_interactive_asks_for_the_deny_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "received.jsonl"
    monkeypatch.setenv("JPD_COMMAND", shlex.join([sys.executable, str(FAKE)]))
    monkeypatch.setenv("JP_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("FAKE_JPD_LOG", str(log))
    assert main(["query", "--new", "--non-interactive", "hi"]) == 0
    starts = [
        m["params"]
        for m in map(json.loads, log.read_text().splitlines())
        if m.get("method") == "turn/start"
    ]
    assert [s.pop("environment")["cwd"] for s in starts] == [os.getcwd()]
    assert starts == [{"message": "hi", "detached": "deny"}]


def test_socket_mode_modules_import_only_the_standard_library() -> None:
    code = (
        "import sys\n"
        "import jpcli.__main__, jpcli.admin, jpcli.commands, jpcli.daemon\n"
        "import jpcli.conversations.basic\n"
        "import jpcli.dispatch\n"
        "import jpcli.follow, jpcli.paths, jpcli.stdio_daemon\n"
        "import jpcli.terminal\n"
        "banned = ['pydantic', 'httpx', 'pygls', 'jpd', 'anyio', 'platformdirs', 'rich']\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] in banned))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout == "[]\n"  # rich is imported only to render on a terminal


def test_hidden_tool_events_are_not_shown() -> None:
    out, err = io.StringIO(), io.StringIO()
    renderer = MarkdownRenderer(out, err, err_tty=False)
    hidden_call = {"kind": "tool_call", "id": "1", "name": "ask_user", "arguments": {}}
    renderer.handle({**hidden_call, "hidden": True})
    renderer.handle(
        {"kind": "tool_result", "id": "1", "content": "x", "isError": True, "hidden": True}
    )
    renderer.finish()
    assert err.getvalue() == ""
