"""`jpd --listen`: many clients on one Unix socket over one daemon, and its lifecycle."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.sockets import ROOT, Daemons, SocketClient, run_jp, socket_env

SLOW = {"text": "tick " * 40, "chunk": 5, "delay_ms": 100}


def read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def persisted(env: dict[str, str], conversation_id: str) -> list[dict[str, Any]]:
    return read_log(Path(env["JP_DATA_DIR"]) / "conversations" / conversation_id / "events.jsonl")


async def test_many_clients_on_one_socket_at_once(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path, [{"text": "same answer", "chunk": 3}] * 8)
    daemon = await daemons.start(env)
    clients = await asyncio.gather(*(SocketClient.connect(daemon.socket) for _ in range(8)))
    await asyncio.gather(*(client.initialize() for client in clients))
    status = await clients[0].request("daemon/status")
    assert status["clients"] == 8 and status["socketPath"] == str(daemon.socket)
    assert status["pid"] == daemon.process.pid

    started = await asyncio.gather(
        *(client.request("turn/start", {"message": f"hi {i}"}) for i, client in enumerate(clients))
    )
    assert len({s["conversationId"] for s in started}) == 8
    for client, turn in zip(clients, started, strict=True):
        done = await client.wait_event(turn["turnId"], "turn_completed")
        assert done["event"]["stopReason"] == "end_turn"
        # Each client sees its own conversation only, every event once and in order.
        assert {e["conversationId"] for e in client.events} == {turn["conversationId"]}
        seqs = [e["seq"] for e in client.events]
        assert seqs == list(range(1, len(seqs) + 1))
        text = "".join(e["event"].get("text", "") for e in client.events)
        assert text == "same answer"
    for client in clients:
        await client.close()
    assert await daemon.stop() == 0


async def test_killed_client_then_attach_from_seq_gets_exactly_the_missing_events(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path, [SLOW])
    daemon = await daemons.start(env)
    # `jp query -F json` prints one JSON object per event; kill it mid-stream.
    jp = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "jpcli", "query", "-F", "json", "tell me"),
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert jp.stdout is not None
    lines = [json.loads(await jp.stdout.readline()) for _ in range(4)]
    jp.kill()
    remaining, _ = await jp.communicate()
    lines += [json.loads(line) for line in remaining.decode().splitlines()]
    assert lines[-1]["event"]["kind"] != "turn_completed"  # it died mid-stream
    seen = [line["seq"] for line in lines]
    conversation_id, turn_id = lines[0]["conversationId"], lines[0]["turnId"]

    client = await SocketClient.connect(daemon.socket)
    await client.initialize()
    attached = await client.request(
        "turn/attach", {"conversationId": conversation_id, "fromSeq": seen[-1]}
    )
    assert [t["turnId"] for t in attached["runningTurns"]] == [turn_id]
    done = await client.wait_event(turn_id, "turn_completed")
    assert done["event"]["stopReason"] == "end_turn"
    got = [e["seq"] for e in client.events]
    # No gap, no duplicate: what the killed client printed, then exactly the rest.
    assert seen + got == list(range(1, got[-1] + 1))
    text = "".join(e["event"].get("text", "") for e in lines + client.events)
    assert text == SLOW["text"]
    await client.close()


async def test_second_daemon_on_a_live_socket_is_refused(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path)
    first = await daemons.start(env)
    second = daemons.spawn(env)
    assert await second.wait_exit() == 1
    stderr = (tmp_path / "logs" / "stderr.txt").read_text()
    assert f"another jpd (pid {first.process.pid}) is already serving {first.socket}" in stderr
    # The first one is untouched and still serves.
    client = await SocketClient.connect(first.socket)
    await client.initialize()
    assert (await client.request("daemon/status"))["pid"] == first.process.pid
    await client.close()


async def test_a_live_socket_of_a_daemon_without_pid_file_is_refused_too(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path)
    path = Path(env["JP_SOCKET"])
    path.parent.mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX) as other:
        other.bind(str(path))
        other.listen()
        daemon = daemons.spawn(env)
        assert await daemon.wait_exit() == 1
    assert (
        "another daemon is already listening on" in (tmp_path / "logs" / "stderr.txt").read_text()
    )


async def test_stale_socket_is_replaced(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path)
    path = Path(env["JP_SOCKET"])
    path.parent.mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX) as dead:  # bound, never listening: like a dead daemon's
        dead.bind(str(path))
    (path.with_suffix(".pid")).write_text("999999\n")  # a pid file nobody holds locked
    daemon = await daemons.start(env)
    client = await SocketClient.connect(daemon.socket)
    await client.initialize()
    assert (await client.request("daemon/status"))["pid"] == daemon.process.pid
    await client.close()
    assert "replacing stale socket" in (tmp_path / "logs" / "jpd.log").read_text()


def _plain_file_at(path: Path) -> None:
    path.parent.mkdir(mode=0o700)
    path.write_text("precious")


async def test_a_file_that_is_not_a_socket_is_left_alone(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path)
    _plain_file_at(Path(env["JP_SOCKET"]))
    assert await daemons.spawn(env).wait_exit() == 1
    assert (tmp_path / "run" / "jpd.sock").read_text() == "precious"
    assert "exists and is not a socket" in (tmp_path / "logs" / "stderr.txt").read_text()


async def test_socket_permissions_pid_file_and_cleanup(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path, socket=tmp_path / "a" / "b" / "jpd.sock")
    daemon = await daemons.start(env)
    assert stat.S_IMODE(os.stat(daemon.socket).st_mode) == 0o600
    for directory in (tmp_path / "a", tmp_path / "a" / "b"):
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    assert daemon.pid_file.read_text() == f"{daemon.process.pid}\n"
    assert await daemon.stop() == 0
    assert not daemon.socket.exists() and not daemon.pid_file.exists()


async def test_idle_daemon_stops_by_itself(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path, idle_timeout=0.3)
    daemon = await daemons.start(env)
    client = await SocketClient.connect(daemon.socket)
    await client.initialize()
    started = await client.request("turn/start", {"message": "hi"})
    await client.wait_event(started["turnId"], "turn_completed")
    await asyncio.sleep(1.0)  # a connected client keeps it alive, however idle
    assert daemon.process.poll() is None
    await client.close()
    assert await daemon.wait_exit() == 0
    assert not daemon.socket.exists() and not daemon.pid_file.exists()
    assert "stopped: idle for 0.3s" in (tmp_path / "logs" / "jpd.log").read_text()


async def test_a_running_turn_keeps_an_idle_daemon_alive(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path, [SLOW], idle_timeout=0.2)
    daemon = await daemons.start(env)
    client = await SocketClient.connect(daemon.socket)
    await client.initialize()
    started = await client.request("turn/start", {"message": "hi"})
    await client.close()  # nobody attached: the turn runs on
    assert await daemon.wait_exit() == 0
    events = persisted(env, started["conversationId"])
    assert events[-1]["type"] == "turn_end" and events[-1]["stop_reason"] == "end_turn"


@pytest.mark.parametrize("how", ["daemon/stop", "SIGTERM", "SIGINT"])
async def test_stop_records_running_turns_as_cancelled(
    tmp_path: Path, daemons: Daemons, how: str
) -> None:
    env = socket_env(tmp_path, [SLOW])
    daemon = await daemons.start(env)
    watcher = await SocketClient.connect(daemon.socket)
    await watcher.initialize()
    started = await watcher.request("turn/start", {"message": "long story"})
    await watcher.wait_event(started["turnId"], "text_delta")
    if how == "daemon/stop":
        stopper = await SocketClient.connect(daemon.socket)
        await stopper.initialize()
        result = await stopper.request("daemon/stop")
        assert result["stopping"] is True
        assert [t["turnId"] for t in result["cancelledTurns"]] == [started["turnId"]]
        await asyncio.wait_for(stopper.closed.wait(), 60)  # hung up once all is recorded
    else:
        daemon.process.send_signal(getattr(signal, how))
    done = await watcher.wait_event(started["turnId"], "turn_completed")
    assert done["event"]["stopReason"] == "cancelled"
    assert await daemon.wait_exit() == 0
    await asyncio.wait_for(watcher.closed.wait(), 60)
    events = persisted(env, started["conversationId"])
    assert events[-1]["type"] == "turn_end" and events[-1]["stop_reason"] == "cancelled"
    assert not daemon.socket.exists()


def test_daemon_status_on_stdio_has_no_socket(tmp_path: Path) -> None:
    env = socket_env(tmp_path)
    result = run_jp(env, "--stdio", "daemon", "status", "-F", "json")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert "socketPath" not in status and status["clients"] == 1 and status["runningTurns"] == []


async def test_stale_pid_lock_after_a_killed_daemon(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path)
    first = await daemons.start(env)
    first.process.kill()  # no cleanup at all: socket and pid file stay behind
    await first.wait_exit()
    assert first.socket.exists()
    second = await daemons.start(env)
    client = await SocketClient.connect(second.socket)
    await client.initialize()
    assert (await client.request("daemon/status"))["pid"] == second.process.pid
    await client.close()
