"""The worker's pipe protocol and its failure modes, with stand-in workers (no model).

A stand-in is a small script run instead of the worker: it answers with bytes no
frame has, or exits at once, or never answers a cancel. The daemon side must end the
request with a clear error, forget (and reap) that worker, and start another next time.
"""

from __future__ import annotations

import signal
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from jpd.llm import local_frames as frames
from jpd.llm import local_worker
from jpd.llm.base import ModelRequest, TextDelta, UserMessage
from jpd.llm.errors import ProviderError
from jpd.llm.local_frames import WorkerSettings
from jpd.llm.local_worker import PORTABLE_CMAKE_ARGS, LocalWorkerProvider, death_message

ROOT = Path(__file__).parents[2]
REQUEST = ModelRequest(model="smollm2", messages=(UserMessage(content="hi"),))


def stand_in(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, body: str) -> Path:
    """Run `body` (Python; `read`, `write` and `struct` given) as the worker; returns a
    file it appends one line to per start."""
    starts = tmp_path / "starts"
    script = tmp_path / "stand_in.py"
    script.write_text(
        "import json, os, struct, sys, time\n"
        f"open({str(starts)!r}, 'a').write('start\\n')\n"
        "def read():\n"
        "    size = struct.unpack('>I', sys.stdin.buffer.read(4))[0]\n"
        "    return json.loads(sys.stdin.buffer.read(size))\n"
        "def write(frame):\n"
        "    body = json.dumps(frame).encode()\n"
        "    sys.stdout.buffer.write(struct.pack('>I', len(body)) + body)\n"
        "    sys.stdout.buffer.flush()\n" + textwrap.dedent(body)
    )

    def command(settings: WorkerSettings) -> list[str]:
        return [sys.executable, str(script)]

    monkeypatch.setattr(local_worker, "worker_command", command)
    return starts


async def collect(provider: LocalWorkerProvider) -> list[object]:
    async with provider.stream(REQUEST) as events:
        return [event async for event in events]


@pytest.mark.anyio
async def test_a_malformed_reply_is_an_error_and_the_worker_is_replaced(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    starts = stand_in(
        monkeypatch,
        tmp_path,
        "read()\nsys.stdout.buffer.write(b'\\xff' * 8)\nsys.stdout.flush()\ntime.sleep(60)\n",
    )
    provider = LocalWorkerProvider()
    try:
        for _ in range(2):
            with pytest.raises(ProviderError, match="malformed reply"):
                await collect(provider)
            assert provider.worker_pid is None  # killed and forgotten
        assert starts.read_text().count("start") == 2
    finally:
        await provider.aclose()


@pytest.mark.anyio
async def test_a_reply_that_is_not_json_of_the_protocol(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stand_in(
        monkeypatch,
        tmp_path,
        "c = read()\nwrite({'op': 'events', 'id': c['id'], 'events': [{'kind': 'nope'}]})\n"
        "time.sleep(60)\n",
    )
    provider = LocalWorkerProvider()
    try:
        with pytest.raises(ProviderError, match="malformed reply"):
            await collect(provider)
    finally:
        await provider.aclose()


@pytest.mark.anyio
async def test_a_worker_that_exits_names_its_status(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stand_in(monkeypatch, tmp_path, "read()\nsys.exit(3)\n")
    provider = LocalWorkerProvider()
    with pytest.raises(ProviderError, match="exited with status 3"):
        await collect(provider)
    with pytest.raises(ProviderError, match="exited with status 3"):
        await provider.count_tokens(REQUEST)


@pytest.mark.anyio
async def test_a_worker_that_exited_is_replaced_by_the_next_request(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The first start exits (status 0, as when idle) before reading; the second answers.
    # (The first request fails, unless it saw the pipe closed: then it starts another.)
    starts = stand_in(
        monkeypatch, tmp_path,
        f"""
        if open({str(tmp_path / "starts")!r}).read().count("start") == 1:
            sys.exit(0)
        c = read()
        write({{"op": "count", "id": c["id"], "tokens": 7}})
        time.sleep(60)
        """,
    )  # fmt: skip
    provider = LocalWorkerProvider()
    try:
        await provider.count_tokens(REQUEST)  # the first worker answers nothing: exits
    except ProviderError as exc:
        assert "exited with status 0" in exc.message
    assert await provider.count_tokens(REQUEST) == 7
    assert starts.read_text().count("start") == 2
    await provider.aclose()


@pytest.mark.anyio
async def test_a_worker_that_ignores_cancel_is_killed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(local_worker, "CANCEL_TIMEOUT", 0.5)
    stand_in(
        monkeypatch, tmp_path,
        "c = read()\nwrite({'op': 'events', 'id': c['id'], "
        "'events': [{'kind': 'text_delta', 'text': 'a'}]})\ntime.sleep(60)\n",
    )  # fmt: skip
    provider = LocalWorkerProvider()
    with anyio.CancelScope() as scope:
        async with provider.stream(REQUEST) as events:
            async for event in events:
                assert event == TextDelta(text="a")
                scope.cancel()
    assert scope.cancelled_caught
    assert provider.worker_pid is None


def test_death_messages_name_the_signal_and_the_fix() -> None:
    message = death_message(-signal.SIGILL)
    assert message.startswith("the local model's worker process died of SIGILL")
    assert f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}"' in message and "--no-cache-dir" in message
    assert "died of signal 99" in death_message(-99)
    assert "exited with status 3" in death_message(3)


def test_install_commands_use_the_portable_build() -> None:
    """The README and the test command build llama.cpp as the crash message says."""
    assert PORTABLE_CMAKE_ARGS in (ROOT / "README.md").read_text()
    assert PORTABLE_CMAKE_ARGS in (ROOT / "scripts" / "test.sh").read_text()


def test_frames_round_trip() -> None:
    replies = [
        frames.Events(id=1, events=[TextDelta(text="a"), TextDelta(text="b")]),
        frames.Done(id=1),
    ]
    for frame in replies:
        encoded = frames.encode(frame)
        assert int.from_bytes(encoded[:4], "big") == len(encoded) - 4
        assert frames.REPLY.validate_json(encoded[4:]) == frame
