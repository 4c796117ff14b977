"""Issue 35 (8, 10): FIFOs, devices and sockets are refused, never opened to block; a
symlink swapped in while folders are made cannot make them outside the workspace."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from jpd.tools.builtin import (
    BuiltinContext,
    default_registry,
    fs_common,
    fs_create_file,
    fs_grep_files,
    fs_read_file,
)
from jpd.tools.confine import PathRefused, Workspace
from jpd.tools.outcome import Failure, Success, ToolOutcome

GUARD = 60
"""Seconds before a call that hangs fails the test (a guard, not a timed assertion)."""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("needle\n")
    os.mkfifo(root / "pipe")
    os.mkfifo(root / "pipe.txt")
    return root


def call(root: Path, name: str, answers: dict[str, Any] | None = None, **args: Any) -> ToolOutcome:
    tool = default_registry().get(name)
    assert tool is not None
    ctx = BuiltinContext(conversation_id="c", tool_docs={}, root=root, env=dict(os.environ))

    async def main() -> ToolOutcome:
        with anyio.fail_after(GUARD):
            return await tool.run(args, answers or {}, ctx)

    return anyio.run(main)


def failure(outcome: ToolOutcome) -> str:
    assert isinstance(outcome, Failure), outcome
    return outcome.message


def test_reading_a_fifo_is_a_clear_error(ws: Path) -> None:
    message = failure(call(ws, "fs_read_file", path="pipe"))
    assert "FIFO" in message and "not a regular file" in message


def test_a_fifo_swapped_in_after_the_check_does_not_block(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The check sees a regular file (as if the FIFO was swapped in just after it): the
    # open must still not block, and the opened file is refused.
    real_lstat = os.lstat
    monkeypatch.setattr(os, "lstat", lambda path, *a, **k: real_lstat(ws / "a.txt"))
    with pytest.raises(PathRefused, match="FIFO"):
        Workspace.of(ws).read_bytes(ws / "pipe")


@pytest.mark.parametrize("search", ["python", "ripgrep"])
def test_grep_skips_fifos_and_refuses_one_named(
    ws: Path, search: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if search == "python":
        monkeypatch.setattr(fs_grep_files, "ripgrep", lambda: None)
    elif fs_grep_files.ripgrep() is None:
        pytest.skip("rg is not on PATH: install '.[test]'")
    found = call(ws, "fs_grep_files", pattern="needle")
    assert isinstance(found, Success) and found.content == "a.txt:1: needle"
    assert "FIFO" in failure(call(ws, "fs_grep_files", pattern="x", path="pipe.txt"))


def test_writers_refuse_a_fifo(ws: Path) -> None:
    message = failure(call(ws, "fs_modify_file", path="pipe", old_text="a", new_text="b"))
    assert "FIFO" in message
    message = failure(call(ws, "fs_create_file", path="pipe", content="x"))
    assert "FIFO" in message and "regular file" in message
    assert (ws / "pipe").is_fifo()


def test_a_socket_is_refused(ws: Path) -> None:
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(ws / "sock"))
        assert "socket" in failure(call(ws, "fs_read_file", path="sock"))


def test_many_fifo_reads_at_once_all_end(ws: Path) -> None:
    """45 reads of a FIFO (more than the workspace tools' threads): each ends with an
    error; none is left holding a thread."""
    tool = default_registry().get("fs_read_file")
    assert tool is not None
    ctx = BuiltinContext(conversation_id="c", tool_docs={}, root=ws)
    results: list[ToolOutcome] = []

    async def one() -> None:
        results.append(await tool.run({"path": "pipe"}, {}, ctx))

    async def main() -> None:
        with anyio.fail_after(GUARD):
            async with anyio.create_task_group() as tasks:
                for _ in range(45):
                    tasks.start_soon(one)
        assert isinstance(await tool.run({"path": "a.txt"}, {}, ctx), Success)

    anyio.run(main)
    assert len(results) == 45 and all(isinstance(r, Failure) for r in results)


def test_racing_symlink_swaps_make_nothing_outside(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    ws = Workspace.of(root)
    stop = threading.Event()

    def swapper() -> None:
        # `d` flips between the real folder and a symlink to `outside`.
        d, away = root / "d", root / "d.away"
        while not stop.is_set():
            steps: tuple[Callable[[], object], ...] = (
                lambda: os.rename(d, away),
                lambda: os.symlink(outside, d),
                lambda: os.unlink(d),
                lambda: os.rename(away, d),
            )
            for step in steps:
                with contextlib.suppress(OSError):
                    step()

    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    made = refused = 0
    try:
        for i in range(400):
            try:
                fs_create_file.create(ws, None, f"d/x{i}/y/z/f.txt", "x\n", False)
                made += 1
            except PathRefused:
                refused += 1
    finally:
        stop.set()
        thread.join()
    assert list(outside.iterdir()) == []
    assert made + refused == 400


def test_a_cancelled_read_returns_while_its_thread_is_stuck(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read stuck in the kernel (a hung file system) cannot hold the turn: the
    cancelled call returns and its thread is left to finish on its own."""
    gate = threading.Event()
    entered = threading.Event()

    def stuck(*args: Any) -> str:
        entered.set()
        gate.wait()
        return "late"

    monkeypatch.setattr(fs_read_file, "_read", stuck)
    tool = default_registry().get("fs_read_file")
    assert tool is not None
    ctx = BuiltinContext(conversation_id="c", tool_docs={}, root=ws)

    async def main() -> bool:
        with anyio.fail_after(GUARD):
            async with anyio.create_task_group() as tasks:

                async def read() -> None:
                    await tool.run({"path": "a.txt"}, {}, ctx)

                tasks.start_soon(read)
                await anyio.to_thread.run_sync(entered.wait)
                tasks.cancel_scope.cancel()  # as `turn/cancel` does
            return True

    try:
        assert anyio.run(main)
    finally:
        gate.set()


def test_a_fifo_gitignore_does_not_block_the_listing(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "sub").mkdir()
    (ws / "sub" / "b.txt").write_text("needle\n")
    os.mkfifo(ws / "sub" / ".gitignore")
    outcome = call(ws, "fs_list_files")
    assert isinstance(outcome, Success)
    assert {"a.txt", "sub/b.txt"} <= set(outcome.content.splitlines())
    monkeypatch.setattr(fs_grep_files, "ripgrep", lambda: None)
    found = call(ws, "fs_grep_files", pattern="needle")
    assert isinstance(found, Success)
    assert found.content.splitlines() == ["a.txt:1: needle", "sub/b.txt:1: needle"]


@pytest.mark.parametrize("search", ["python", "ripgrep"])
def test_a_huge_number_of_matches_stops_the_search_early(
    tmp_path: Path, search: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if search == "python":
        monkeypatch.setattr(fs_grep_files, "ripgrep", lambda: None)
    elif fs_grep_files.ripgrep() is None:
        pytest.skip("rg is not on PATH: install '.[test]'")
    root = tmp_path / "ws"
    root.mkdir()
    for n in range(50):
        (root / f"f{n:02}.txt").write_text("needle\n" * 300)
    found = call(root, "fs_grep_files", pattern="needle")
    assert isinstance(found, Success)
    lines = found.content.splitlines()
    assert len(lines) == fs_grep_files.LIMIT + 1
    assert lines[0] == "f00.txt:1: needle"
    assert lines[-1].startswith("... and more than ")


def test_stuck_reads_hold_their_own_pool_only(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """45 reads stuck in the kernel hold at most the workspace tools' threads: the
    daemon's other blocking work still runs, and cancelling ends them all."""
    gate = threading.Event()
    inside = threading.Semaphore(0)

    def stuck(*args: Any) -> str:
        inside.release()
        gate.wait()
        return "late"

    monkeypatch.setattr(fs_read_file, "_read", stuck)
    tool = default_registry().get("fs_read_file")
    assert tool is not None
    ctx = BuiltinContext(conversation_id="c", tool_docs={}, root=ws)

    async def main() -> str:
        with anyio.fail_after(GUARD):
            async with anyio.create_task_group() as tasks:
                for _ in range(45):
                    tasks.start_soon(tool.run, {"path": "a.txt"}, {}, ctx)
                for _ in range(fs_common.WORKER_THREADS):
                    await anyio.to_thread.run_sync(inside.acquire)
                other = await anyio.to_thread.run_sync(lambda: "other work ran")
                tasks.cancel_scope.cancel()
            return other

    try:
        assert anyio.run(main) == "other work ran"
    finally:
        gate.set()
