"""The embedded model's worker process, through the real daemon (protocol.md 8.2).

A real signal kills the real worker mid-turn: only that turn ends (with an error
naming the signal), the daemon and its other conversations go on, and the next local
turn starts a new worker. A daemon killed with SIGKILL takes its worker with it.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from tests.e2e.conftest import StartJpd
from tests.e2e.harness import Jpd

LOCAL = "local/smollm2"
SCRIPTED = {"assistant": {"model": {"id": "test/scripted"}}}


def workers_of(daemon_pid: int) -> list[int]:
    """The daemon's embedded-model workers (its children running local_worker_main)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == daemon_pid and b"jpd.llm.local_worker_main" in command:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


async def gone(pid: int) -> bool:
    for _ in range(1500):  # up to 30 s on a busy machine
        if not alive(pid):
            return True
        await asyncio.sleep(0.02)
    return False


async def kill_worker_mid_turn(daemon: Jpd, sig: signal.Signals) -> dict[str, object]:
    """Start a long local turn, send `sig` to its worker after the first text; the end."""
    started = await daemon.request(
        "turn/start",
        {
            "message": "Write a long story about the sea.",
            "config": {"assistant": {"model": {"parameters": {"max_tokens": 400}}}},
        },
    )
    await daemon.wait_event(started["turnId"], "text_delta")
    [worker] = workers_of(daemon.process.pid)
    os.kill(worker, sig)
    await daemon.wait_event(started["turnId"], "turn_completed")
    assert await gone(worker)
    end = daemon.turn_events(started["turnId"])[-1]["event"]
    assert isinstance(end, dict)
    return end


@pytest.mark.parametrize(
    ("sig", "meaning"),
    [
        (signal.SIGKILL, "for lack of memory"),
        (signal.SIGILL, "the llama.cpp build uses CPU instructions this machine cannot run"),
    ],
)
async def test_worker_killed_mid_turn_costs_only_that_turn(
    jpd_factory: StartJpd, sig: signal.Signals, meaning: str
) -> None:
    daemon = await jpd_factory(
        model=LOCAL, responses=[{"text": "still here", "chunk": 1, "delay_ms": 20}] * 2
    )
    await daemon.initialize()
    # Another conversation streams meanwhile, on another model.
    other = await daemon.request("turn/start", {"message": "hi", "config": SCRIPTED})
    end = await kill_worker_mid_turn(daemon, sig)
    assert end["stopReason"] == "error"
    error = str(end["error"])
    assert f"died of {sig.name}" in error and meaning in error
    if sig == signal.SIGILL:
        assert "CMAKE_ARGS=" in error
        # The worker's fault handler wrote where it died into the daemon's log (stderr).
        assert b"Fatal Python error: Illegal instruction" in daemon.stderr
    await daemon.wait_event(other["turnId"], "turn_completed")
    other_end = daemon.turn_events(other["turnId"])[-1]["event"]
    assert other_end["stopReason"] == "end_turn"
    # The daemon goes on; the next local turn gets a new worker and answers.
    assert daemon.process.returncode is None
    _, events = await daemon.run_turn(
        "Say hello.", config={"assistant": {"model": {"parameters": {"max_tokens": 8}}}}
    )
    assert events[-1]["event"]["stopReason"] in ("end_turn", "max_tokens")
    assert len(workers_of(daemon.process.pid)) == 1
    _, events = await daemon.run_turn("hi", config=SCRIPTED)
    assert events[-1]["event"]["stopReason"] == "end_turn"


async def test_worker_dies_with_a_sigkilled_daemon(jpd_factory: StartJpd) -> None:
    daemon = await jpd_factory(model=LOCAL, config="[assistant.model.parameters]\nmax_tokens = 4\n")
    await daemon.initialize()
    _, events = await daemon.run_turn("Hi.")
    assert events[-1]["event"]["stopReason"] in ("end_turn", "max_tokens")
    [worker] = workers_of(daemon.process.pid)
    daemon.process.kill()
    await daemon.process.wait()
    assert await gone(worker)


async def test_worker_ends_when_idle(jpd_factory: StartJpd) -> None:
    daemon = await jpd_factory(
        model=LOCAL,
        config="[assistant.model.parameters]\nmax_tokens = 4\n"
        "[providers.local]\nidle_timeout = 1.0\n",
    )
    await daemon.initialize()
    await daemon.run_turn("Hi.")
    [worker] = workers_of(daemon.process.pid)
    assert await gone(worker)
    _, events = await daemon.run_turn("Hi again.")
    assert events[-1]["event"]["stopReason"] in ("end_turn", "max_tokens")
    assert workers_of(daemon.process.pid) not in ([], [worker])


async def test_worker_ends_with_a_daemon_that_stops(jpd_factory: StartJpd) -> None:
    daemon = await jpd_factory(model=LOCAL, config="[assistant.model.parameters]\nmax_tokens = 4\n")
    await daemon.initialize()
    await daemon.run_turn("Hi.")
    [worker] = workers_of(daemon.process.pid)
    assert await daemon.stop() == 0
    assert await gone(worker)
