"""Writes to a stdio client's pipe (protocol.md 7.3): done on the event loop, never a
blocking write, so the loop keeps running while the client is slow and a client that
reads nothing can be given up on."""

from __future__ import annotations

import os
from collections.abc import Iterator

import anyio
import pytest

from jpd.rpc.stdio import write_pipe


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_fd, write_fd = os.pipe()
    try:
        yield read_fd, write_fd
    finally:
        for fd in (read_fd, write_fd):
            os.close(fd)


def _read_all(fd: int, size: int) -> bytes:
    parts: list[bytes] = []
    while size:
        part = os.read(fd, min(size, 65536))
        parts.append(part)
        size -= len(part)
    return b"".join(parts)


async def test_a_frame_larger_than_the_pipe_arrives_whole_and_in_order(
    pipe: tuple[int, int],
) -> None:
    read_fd, write_fd = pipe
    frame = bytes(range(256)) * 2000  # 512 KB: eight times a default pipe's capacity
    received: list[bytes] = []

    async def read() -> None:  # in a thread, as another process would
        received.append(await anyio.to_thread.run_sync(_read_all, read_fd, len(frame)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        await write_pipe(write_fd, frame)
    assert received == [frame]


async def test_the_loop_runs_while_the_pipe_is_full_and_the_wait_can_be_cancelled(
    pipe: tuple[int, int],
) -> None:
    _, write_fd = pipe
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.sleep(0.01)

    async with anyio.create_task_group() as tg:
        tg.start_soon(tick)
        # Nobody reads: the pipe fills, and the write waits for room without blocking
        # the loop, until the stall timeout's cancel scope gives up on the client.
        with anyio.move_on_after(0.3) as scope:
            await write_pipe(write_fd, b"x" * (1024 * 1024))
        tg.cancel_scope.cancel()
    assert scope.cancelled_caught
    assert ticks > 5
