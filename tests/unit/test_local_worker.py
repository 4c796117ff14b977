"""The embedded model in its worker process (`jpd.llm.local_worker`), real SmolLM2.

The worker is real: these tests kill it with real signals mid-request and check that
only that request fails, and that the next one starts a new worker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import pytest_asyncio
from anyio.streams.buffered import BufferedByteReceiveStream

from jpd.llm.base import Finish, ModelRequest, StreamEvent, TextDelta, UsageEvent, UserMessage
from jpd.llm.errors import ProviderError, ProviderUnavailable
from jpd.llm.local import LocalProvider
from jpd.llm.local_worker import LocalWorkerProvider

pytestmark = pytest.mark.asyncio(loop_scope="module")

ROOT = Path(__file__).parents[2]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def provider() -> AsyncIterator[LocalWorkerProvider]:
    local = LocalWorkerProvider()
    yield local
    await local.aclose()


def _ask(text: str, **kwargs: Any) -> ModelRequest:
    kwargs.setdefault("model", "smollm2")
    return ModelRequest(messages=(UserMessage(content=text),), **kwargs)


async def _collect(provider: Any, request: ModelRequest) -> list[StreamEvent]:
    async with provider.stream(request) as events:
        return [event async for event in events]


def _text(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


async def _wait_gone(pid: int) -> None:
    assert await anyio.to_thread.run_sync(_gone_within, pid, 30.0), f"{pid} still runs"


async def test_worker_answers_like_the_model_in_process(provider: LocalWorkerProvider) -> None:
    request = _ask("Name a colour.", max_tokens=24)
    through_worker = await _collect(provider, request)
    assert provider.worker_pid is not None and provider.worker_pid != os.getpid()
    in_process = LocalProvider()
    try:
        direct = await _collect(in_process, request)
    finally:
        await in_process.aclose()
    assert through_worker == direct  # same seed: the same tokens, usage and finish
    assert isinstance(through_worker[-1], Finish) and _text(through_worker).strip()


async def test_count_tokens_is_the_prompt_the_model_sees(provider: LocalWorkerProvider) -> None:
    request = _ask("How many tokens is this?", max_tokens=2)
    counted = await provider.count_tokens(request)
    usage = next(e for e in await _collect(provider, request) if isinstance(e, UsageEvent))
    assert counted == usage.usage.input_tokens > 5


async def test_worker_stays_warm_between_requests(provider: LocalWorkerProvider) -> None:
    await _collect(provider, _ask("Hi.", max_tokens=2))
    pid = provider.worker_pid
    await _collect(provider, _ask("Hello.", max_tokens=2))
    assert provider.worker_pid == pid


async def test_cancel_mid_stream_leaves_worker_usable(provider: LocalWorkerProvider) -> None:
    await _collect(provider, _ask("Hi.", max_tokens=2))
    pid = provider.worker_pid
    received: list[StreamEvent] = []
    with anyio.CancelScope() as scope:
        async with provider.stream(_ask("Tell me about the sea.", max_tokens=200)) as events:
            async for event in events:
                received.append(event)
                scope.cancel()
    assert scope.cancelled_caught and len(received) == 1
    events = await _collect(provider, _ask("Say hello.", max_tokens=8))
    assert isinstance(events[-1], Finish) and _text(events).strip()
    assert provider.worker_pid == pid  # cancelling did not cost the worker


async def test_abandoned_stream_leaves_worker_usable(provider: LocalWorkerProvider) -> None:
    async with provider.stream(_ask("Count to ten.", max_tokens=50)) as events:
        async for _ in events:
            break
    events = await _collect(provider, _ask("Say hi.", max_tokens=6))
    assert isinstance(events[-1], Finish)


async def test_model_errors_come_back_and_the_worker_goes_on(
    provider: LocalWorkerProvider, tmp_path: Path
) -> None:
    await _collect(provider, _ask("Hi.", max_tokens=2))
    pid = provider.worker_pid
    with pytest.raises(ProviderError, match="does not fit"):
        await _collect(provider, _ask("word " * 5000))
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a model")
    with pytest.raises(ProviderUnavailable, match="could not load"):
        await _collect(provider, _ask("hi", model=str(bogus)))
    assert provider.worker_pid == pid
    assert isinstance((await _collect(provider, _ask("Hi.", max_tokens=2)))[-1], Finish)


@pytest.mark.parametrize(
    ("sig", "meaning"),
    [
        (signal.SIGKILL, "for lack of memory"),
        (signal.SIGILL, "CPU instructions this machine cannot run"),
        (signal.SIGSEGV, "llama.cpp crashed"),
    ],
)
async def test_worker_killed_mid_stream_fails_only_that_request(
    provider: LocalWorkerProvider, sig: signal.Signals, meaning: str
) -> None:
    received: list[StreamEvent] = []
    with pytest.raises(ProviderError) as caught:
        async with provider.stream(_ask("Write a long story.", max_tokens=400)) as events:
            async for event in events:
                received.append(event)
                if len(received) == 1:
                    assert provider.worker_pid is not None
                    killed = provider.worker_pid
                    os.kill(killed, sig)
    assert f"died of {sig.name}" in caught.value.message
    assert meaning in caught.value.message
    assert "next local turn starts a new worker" in caught.value.message
    assert not any(isinstance(e, Finish) for e in received)
    assert provider.worker_pid is None
    events = await _collect(provider, _ask("Say hi.", max_tokens=6))
    assert isinstance(events[-1], Finish)
    assert provider.worker_pid not in (None, killed)


async def test_worker_ends_when_idle_and_comes_back() -> None:
    local = LocalWorkerProvider(idle_timeout=1.5)
    try:
        await _collect(local, _ask("Hi.", max_tokens=2))
        first = local.worker_pid
        assert first is not None
        await _wait_gone(first)
        events = await _collect(local, _ask("Hi.", max_tokens=2))
        assert isinstance(events[-1], Finish)
        assert local.worker_pid not in (None, first)
    finally:
        await local.aclose()


async def test_aclose_ends_the_worker() -> None:
    local = LocalWorkerProvider()
    assert await local.count_tokens(_ask("Hi.")) > 0
    pid = local.worker_pid
    assert pid is not None and _alive(pid)
    await local.aclose()
    assert not _alive(pid) and local.worker_pid is None


async def test_worker_dies_with_its_parent_even_on_sigkill(tmp_path: Path) -> None:
    """A stand-in daemon starts a worker, then is SIGKILLed: the worker ends too."""
    parent = textwrap.dedent(
        """
        import anyio, sys
        from jpd.llm.base import ModelRequest, UserMessage
        from jpd.llm.local_worker import LocalWorkerProvider

        async def main():
            local = LocalWorkerProvider()
            await local.count_tokens(ModelRequest(model="smollm2",
                messages=(UserMessage(content="hi"),)))
            print(local.worker_pid, flush=True)
            await anyio.sleep(600)

        anyio.run(main)
        """
    )
    async with await anyio.open_process(
        [sys.executable, "-c", parent], stdout=subprocess.PIPE, stderr=None, cwd=ROOT
    ) as process:
        assert process.stdout is not None
        try:
            worker = int(await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 99))
            assert _alive(worker)
        finally:
            process.kill()
            await process.wait()
    await _wait_gone(worker)
