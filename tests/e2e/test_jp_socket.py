"""`jp` against a real `jpd --listen`: autostart, query, attach, turn ls, daemon commands,
and the terminal flow (markdown, Ctrl-C choices) in a real pseudo-terminal."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.e2e.sockets import ROOT, Daemons, run_jp, run_jp_async, socket_env

SLOW = {"text": "tick " * 30, "chunk": 5, "delay_ms": 100}
MARKDOWN = "# Title\n\nSome **bold** words.\n\n- first item\n- second item\n"


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def persisted(env: dict[str, str], conversation_id: str) -> list[dict[str, Any]]:
    path = Path(env["JP_DATA_DIR"]) / "conversations" / conversation_id / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_jp_starts_the_daemon_then_status_and_stop(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path)
    daemons.watch(env)  # stopped at the end even if an assertion fails first
    socket = Path(env["JP_SOCKET"])
    result = await run_jp_async(env, "query", "hi")
    assert (result.returncode, result.stdout) == (0, "ok\n"), result.stderr
    pid = int(socket.with_suffix(".pid").read_text())

    status = await run_jp_async(env, "daemon", "status")
    assert status.returncode == 0
    assert f"pid {pid}" in status.stdout and f"socket:  {socket}" in status.stdout
    assert "running turns: 0" in status.stdout
    as_json = json.loads((await run_jp_async(env, "daemon", "status", "-F", "json")).stdout)
    assert as_json["pid"] == pid and as_json["clients"] == 1

    stop = await run_jp_async(env, "daemon", "stop")
    assert (stop.returncode, stop.stdout) == (0, "jpd stopped\n")
    assert not any(socket.parent.iterdir())  # socket and pid file removed
    gone = await run_jp_async(env, "daemon", "status")
    assert gone.returncode == 3 and "jpd is not running" in gone.stderr
    again = await run_jp_async(env, "daemon", "stop")
    assert again.returncode == 0 and "not running" in again.stderr


async def test_query_json_prints_one_event_per_line(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path, [{"text": "two words", "chunk": 4}])
    await daemons.start(env)
    result = await run_jp_async(env, "query", "--new", "-F", "json", "hi")
    assert result.returncode == 0, result.stderr
    events = json_lines(result.stdout)
    kinds = [e["event"]["kind"] for e in events]
    assert kinds[0] == "turn_started" and kinds[-1] == "turn_completed"
    assert "".join(e["event"].get("text", "") for e in events) == "two words"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert len({(e["conversationId"], e["turnId"]) for e in events}) == 1


async def test_detach_then_turn_ls_then_attach(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path, [SLOW])
    await daemons.start(env)
    started = await run_jp_async(env, "query", "--new", "--detach", "tell a story")
    assert started.returncode == 0, started.stderr
    conversation_id, turn_id = started.stdout.split()

    listed = await run_jp_async(env, "turn", "ls")
    assert listed.returncode == 0
    assert listed.stdout.startswith(f"{turn_id}  {conversation_id}  test/scripted  started ")
    turns = json.loads((await run_jp_async(env, "turn", "ls", "-F", "json")).stdout)["turns"]
    assert [t["turnId"] for t in turns] == [turn_id]

    # No argument: the conversation with the running turn, shown from its start.
    attached = await run_jp_async(env, "attach")
    assert (attached.returncode, attached.stdout) == (0, SLOW["text"].rstrip() + " \n")
    after = await run_jp_async(env, "turn", "ls")
    assert (after.stdout, after.stderr) == ("", "jp: no running turns\n")


async def test_detach_json_prints_the_ids(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path)
    await daemons.start(env)
    result = await run_jp_async(env, "query", "--detach", "-F", "json", "hi")
    assert result.returncode == 0
    assert set(json.loads(result.stdout)) == {"conversationId", "turnId"}


async def test_attach_from_seq_replays_exactly_the_events_after_it(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path, [{"text": "abcdefghij", "chunk": 2}, {"text": "second"}])
    await daemons.start(env)
    first = json_lines((await run_jp_async(env, "query", "--new", "-F", "json", "one")).stdout)
    conversation_id = first[0]["conversationId"]
    second = await run_jp_async(env, "query", "-F", "json", "two")  # same conversation
    everything = first + json_lines(second.stdout)

    replay = await run_jp_async(env, "attach", conversation_id, "--from-seq", "3", "-F", "json")
    assert replay.returncode == 0, replay.stderr
    assert json_lines(replay.stdout) == [e for e in everything if e["seq"] > 3]

    # Without --from-seq and nothing running: says so (exit 4), replays nothing.
    last = await run_jp_async(env, "attach", conversation_id)
    assert (last.returncode, last.stdout) == (4, "")
    assert last.stderr.startswith(f"jp: no turn is running in {conversation_id}")


async def test_attach_errors(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path)
    await daemons.start(env)
    missing = await run_jp_async(env, "attach", "c-nope")
    assert (missing.returncode, missing.stderr) == (1, "jp: conversation not found: c-nope\n")
    nothing = await run_jp_async(env, "attach")
    assert (nothing.returncode, nothing.stderr) == (
        4,
        "jp: no turn is running (jp turn ls); nothing to attach to\n",
    )
    bad = await run_jp_async(env, "attach", "--from-seq", "-1")
    assert bad.returncode == 2 and "expected an integer >= 0" in bad.stderr


# --- the terminal flow, in a pseudo-terminal ---------------------------------------------


@pytest.fixture
def terminal_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = socket_env(tmp_path, [SLOW, {"text": MARKDOWN, "chunk": 7, "delay_ms": 5}])
    env.update(TERM="xterm-256color", COLUMNS="80", LINES="24")
    yield env


def spawn_jp(env: dict[str, str], *args: str) -> pexpect.spawn:
    return pexpect.spawn(
        sys.executable,
        ["-m", "jpcli", *args],
        cwd=str(ROOT),
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=(24, 80),
    )


def finish(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus is not None
    return int(child.exitstatus)


async def test_terminal_renders_markdown(terminal_env: dict[str, str], daemons: Daemons) -> None:
    await daemons.start(terminal_env)
    run_jp(terminal_env, "query", "--new", "--detach", "first")  # uses up the slow answer
    child = spawn_jp(terminal_env, "query", "--new", "show markdown")
    child.expect("second item")
    output = child.before + child.after
    assert finish(child) == 0
    assert "Title" in output and "# Title" not in output  # a heading, not its markup
    assert "bold" in output and "**bold**" not in output
    assert "•" in output  # list bullets


async def test_no_color_prints_plain_text(terminal_env: dict[str, str], daemons: Daemons) -> None:
    await daemons.start(terminal_env)
    run_jp(terminal_env, "query", "--new", "--detach", "first")
    child = spawn_jp({**terminal_env, "NO_COLOR": "1"}, "query", "--new", "show markdown")
    child.expect("second item")
    assert "**bold**" in child.before
    assert finish(child) == 0


async def test_ctrl_c_then_detach_leaves_the_turn_running(
    terminal_env: dict[str, str], daemons: Daemons
) -> None:
    await daemons.start(terminal_env)
    child = spawn_jp(terminal_env, "query", "--new", "tell a story")
    child.expect("tick")
    child.sendintr()
    child.expect(r"\[c\]ancel the turn, \[d\]etach and leave it running, or \[r\]esume\?")
    child.send("d")
    child.expect("detached; the turn keeps running. Re-attach with: jp attach (c-\\S+)")
    conversation_id = child.match.group(1)
    assert finish(child) == 0
    listed = run_jp(terminal_env, "turn", "ls")
    assert conversation_id in listed.stdout
    attached = run_jp(terminal_env, "attach", conversation_id)
    assert (attached.returncode, attached.stdout) == (0, SLOW["text"].rstrip() + " \n")


async def test_ctrl_c_then_cancel_records_the_cancellation(
    terminal_env: dict[str, str], daemons: Daemons
) -> None:
    await daemons.start(terminal_env)
    child = spawn_jp(terminal_env, "query", "--new", "tell a story")
    child.expect("tick")
    child.sendintr()
    child.expect(r"\[c\]ancel")
    child.send("c")
    child.expect("cancelling")
    assert finish(child) == 130
    conversations = json.loads(run_jp(terminal_env, "turn", "ls", "-F", "json").stdout)
    assert conversations["turns"] == []
    listed = json.loads(run_jp(terminal_env, "conversation", "ls", "-F", "json").stdout)
    events = persisted(terminal_env, listed["conversations"][0]["conversationId"])
    assert events[-1]["type"] == "turn_end" and events[-1]["stop_reason"] == "cancelled"
