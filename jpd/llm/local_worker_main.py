"""The embedded model's worker process: `python -m jpd.llm.local_worker_main SETTINGS`.

Started by the daemon (`jpd.llm.local_worker`) on the first local turn, so that a
crash of llama.cpp's native code (a bad build, model file or driver) takes down only
this process. SETTINGS is a JSON object (`local_frames.WorkerSettings`). The worker serves the
frames of `jpd.llm.local_frames` on its stdin and stdout with an in-process
`LocalProvider`, and ends:

- when its stdin reaches end of file: the daemon closed it, or the daemon is gone
  (however it ended, SIGKILL included, the kernel closes the pipe);
- on Linux also by PR_SET_PDEATHSIG, should its event loop be stuck;
- by itself (exit status 0) after `idle_timeout` seconds without a command.

Python's fault handler writes a fatal signal's traceback to stderr, which is the
daemon's (its log when `jp` started it).
"""

from __future__ import annotations

import ctypes
import faulthandler
import logging
import math
import os
import signal
import sys
from pathlib import Path
from typing import BinaryIO

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.file import FileReadStream
from pydantic import BaseModel

from jpd.llm import local_frames as frames
from jpd.llm.errors import ContextOverflow, ProviderError, ProviderUnavailable
from jpd.llm.local import LocalProvider

_PR_SET_PDEATHSIG = 1
LOG_FORMAT = "%(asctime)s jpd-worker[%(process)d] %(levelname)s %(name)s: %(message)s"

log = logging.getLogger(__name__)


def die_with_parent(parent: int) -> None:
    """Be killed when the daemon ends (Linux); exit now if it already has."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the daemon died before the line above took effect
        os._exit(1)


class _Server:
    def __init__(self, provider: LocalProvider, out: BinaryIO, idle_timeout: float) -> None:
        self._provider = provider
        self._out = out
        self._idle_timeout = idle_timeout
        self._running: dict[int, anyio.CancelScope] = {}
        self._idle_since = 0.0  # set when serving starts
        self._outbox_in, self._outbox = anyio.create_memory_object_stream[BaseModel](math.inf)

    async def serve(self, commands: BufferedByteReceiveStream) -> None:
        self._idle_since = anyio.current_time()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._write_replies)
            tasks.start_soon(self._exit_when_idle)
            while True:
                try:
                    body = await frames.receive_body(commands)
                except (anyio.IncompleteRead, anyio.EndOfStream):
                    log.debug("the daemon closed the pipe: exiting")
                    os._exit(0)
                self._idle_since = anyio.current_time()
                command = frames.COMMAND.validate_json(body)
                if isinstance(command, frames.Cancel):
                    scope = self._running.get(command.id)
                    if scope is not None:
                        scope.cancel()
                else:
                    self._running[command.id] = anyio.CancelScope()
                    tasks.start_soon(self._run, command)

    async def _exit_when_idle(self) -> None:
        while True:
            deadline = self._idle_since + self._idle_timeout
            if self._running or anyio.current_time() < deadline:
                await anyio.sleep(max(deadline - anyio.current_time(), 0.1))
                continue
            log.info("idle for %gs: exiting", self._idle_timeout)
            os._exit(0)

    async def _run(self, command: frames.Generate | frames.CountTokens) -> None:
        reply: BaseModel = frames.Done(id=command.id)  # also what a cancelled one gets
        with self._running[command.id]:
            try:
                if isinstance(command, frames.CountTokens):
                    tokens = await self._provider.count_tokens(command.request)
                    reply = frames.Count(id=command.id, tokens=tokens)
                else:
                    async with self._provider.stream(command.request) as events:
                        async for event in events:
                            await self._outbox_in.send(frames.Events(id=command.id, events=[event]))
                    reply = frames.Done(id=command.id)
            except ProviderError as exc:
                unavailable = isinstance(exc, ProviderUnavailable)
                reply = frames.Failed(
                    id=command.id,
                    message=exc.message,
                    unavailable=unavailable,
                    overflow=isinstance(exc, ContextOverflow),
                )
            except Exception as exc:  # reported to the turn; the worker goes on
                log.exception("local model request failed")
                reply = frames.Failed(id=command.id, message=f"local model failed: {exc}")
        del self._running[command.id]
        self._idle_since = anyio.current_time()
        await self._outbox_in.send(reply)

    async def _write_replies(self) -> None:
        async for first in self._outbox:
            batch = [first]
            while True:  # what arrived together goes in one write
                try:
                    batch.append(self._outbox.receive_nowait())
                except anyio.WouldBlock:
                    break
            data = b"".join(frames.encode(frame) for frame in _merge(batch))
            await anyio.to_thread.run_sync(self._write, data)

    def _write(self, data: bytes) -> None:
        try:
            self._out.write(data)
            self._out.flush()
        except OSError:  # the daemon is gone
            os._exit(0)


def _merge(batch: list[BaseModel]) -> list[BaseModel]:
    """Consecutive `Events` of one generation as one frame."""
    merged: list[BaseModel] = []
    for frame in batch:
        last = merged[-1] if merged else None
        if (
            isinstance(frame, frames.Events)
            and isinstance(last, frames.Events)
            and last.id == frame.id
        ):
            merged[-1] = frames.Events(id=frame.id, events=[*last.events, *frame.events])
        else:
            merged.append(frame)
    return merged


def main(argv: list[str]) -> None:
    """Serve the daemon; never returns normally."""
    settings = frames.WorkerSettings.model_validate_json(argv[0])
    die_with_parent(settings.parent)
    # Terminal signals are the daemon's to handle; the daemon ends the worker itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    faulthandler.enable(sys.stderr)
    logging.basicConfig(level=settings.log_level, format=LOG_FORMAT, stream=sys.stderr)
    # The frames get a private copy of stdout; fd 1 becomes stderr, so that anything
    # native code prints cannot corrupt them.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    commands = BufferedByteReceiveStream(FileReadStream(open(0, "rb", buffering=0)))  # noqa: SIM115
    provider = LocalProvider(
        model_path=None if settings.model_path is None else Path(settings.model_path),
        n_ctx=settings.n_ctx,
        n_threads=settings.n_threads,
        seed=settings.seed,
    )
    server = _Server(provider, out, settings.idle_timeout)
    try:
        anyio.run(server.serve, commands)
    finally:
        os._exit(0)  # a thread blocked on the pipe must not hold the exit


if __name__ == "__main__":
    main(sys.argv[1:])
