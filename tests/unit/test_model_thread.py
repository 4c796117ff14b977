"""`run_on_model_thread`: every native model call on one thread (see its module)."""

from __future__ import annotations

import threading

import anyio
import pytest

from jpd.llm.model_thread import run_on_model_thread


async def test_every_call_runs_on_one_thread_that_is_not_the_loops() -> None:
    threads = {await run_on_model_thread(threading.get_ident) for _ in range(5)}
    async with anyio.create_task_group() as tg:
        for _ in range(5):

            async def call() -> None:
                threads.add(await run_on_model_thread(threading.get_ident))

            tg.start_soon(call)
    assert len(threads) == 1 and threading.get_ident() not in threads


async def test_results_and_errors_come_back_to_the_caller() -> None:
    assert await run_on_model_thread(sum, [1, 2, 3]) == 6

    def fail() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await run_on_model_thread(fail)


async def test_a_cancelled_caller_waits_for_the_call_to_end() -> None:
    """The model must not be touched by the next call while this one still runs."""
    started, release = threading.Event(), threading.Event()
    ended: list[bool] = []

    def slow() -> None:
        started.set()
        release.wait(5)
        ended.append(True)

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def cancel_once_started() -> None:
                await anyio.to_thread.run_sync(started.wait, 5)
                scope.cancel()
                await anyio.sleep(0.05)
                assert not ended  # still waiting for the call
                release.set()

            tg.start_soon(cancel_once_started)
            await run_on_model_thread(slow)
    assert scope.cancelled_caught and ended == [True]
