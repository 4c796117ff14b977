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

import contextlib
import ctypes
import faulthandler
import logging
import os
import signal
import sys
import threading
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream
from anyio.streams.buffered import BufferedByteReceiveStream
from pydantic import BaseModel

from jpd.llm import local_frames as frames
from jpd.llm.errors import ContextOverflow, ProviderError, ProviderUnavailable
from jpd.llm.local import LocalProvider
from jpd.llm.model_thread import run_on_model_thread

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


class _PipeReader(ByteReceiveStream):
    """A pipe read when the event loop sees data: no thread between a command and
    its handling (a thread's wake-up is on the way to the first token)."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not data:
                raise anyio.EndOfStream
            return data

    async def aclose(self) -> None:
        os.close(self._fd)


class _Server:
    """Runs each command on the model thread, which also writes its replies: a token
    goes from llama.cpp to the pipe with no hop through the event loop, whose only
    work is to read commands (and to stop a generation on `Cancel`)."""

    def __init__(self, provider: LocalProvider, out: int, idle_timeout: float) -> None:
        self._provider = provider
        self._out = out
        self._idle_timeout = idle_timeout
        self._running: dict[int, threading.Event] = {}
        """Commands not yet answered, with the flag that stops each."""
        self._idle_since = 0.0  # set when serving starts

    async def serve(self, commands: BufferedByteReceiveStream) -> None:
        self._idle_since = anyio.current_time()
        async with anyio.create_task_group() as tasks:
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
                    stop = self._running.get(command.id)
                    if stop is not None:
                        stop.set()
                else:
                    self._running[command.id] = threading.Event()
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
        try:
            await run_on_model_thread(self._answer, command, self._running[command.id])
        finally:
            del self._running[command.id]
            self._idle_since = anyio.current_time()

    def _answer(self, command: frames.Generate | frames.CountTokens, stop: threading.Event) -> None:
        """On the model thread: run `command`, writing its replies as they come."""
        reply: BaseModel = frames.Done(id=command.id)  # also what a stopped one gets
        try:
            if isinstance(command, frames.CountTokens):
                reply = frames.Count(id=command.id, tokens=self._provider.count(command.request))
            elif not stop.is_set():  # cancelled while it waited for the model thread
                with contextlib.closing(self._provider.generate(command.request)) as steps:
                    for step in steps:
                        if stop.is_set():
                            break
                        if step is not None:
                            self._write(frames.Events(id=command.id, events=[step]))
        except ProviderError as exc:
            reply = frames.Failed(
                id=command.id,
                message=exc.message,
                unavailable=isinstance(exc, ProviderUnavailable),
                overflow=isinstance(exc, ContextOverflow),
            )
        except Exception as exc:  # reported to the turn; the worker goes on
            log.exception("local model request failed")
            reply = frames.Failed(id=command.id, message=f"local model failed: {exc}")
        self._write(reply)

    def _write(self, frame: BaseModel) -> None:
        view = memoryview(frames.encode(frame))
        try:
            while view:
                view = view[os.write(self._out, view) :]
        except OSError:  # the daemon is gone
            os._exit(0)


def main(argv: list[str]) -> None:
    """Serve the daemon; never returns normally."""
    settings = frames.WorkerSettings.model_validate_json(argv[0])
    die_with_parent(settings.parent)
    # Terminal signals are the daemon's to handle; the daemon ends the worker itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    faulthandler.enable(sys.stderr)
    # libgomp's threads spin for a while after each parallel step (the prompt's): on a
    # machine of few cores that spinning held up the daemon and the first token by ms.
    os.environ.setdefault("GOMP_SPINCOUNT", "10000")
    logging.basicConfig(level=settings.log_level, format=LOG_FORMAT, stream=sys.stderr)
    # The frames get a private copy of stdout; fd 1 becomes stderr, so that anything
    # native code prints cannot corrupt them.
    out = os.dup(1)
    os.dup2(2, 1)
    commands = BufferedByteReceiveStream(_PipeReader(0))
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
