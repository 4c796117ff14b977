"""The `local` provider as the daemon sees it: the embedded model in a worker process.

llama.cpp is native code; a crash there (SIGILL from a build for another CPU, SIGSEGV
from a bad model file) would end every client's daemon. So the model runs in a worker
(`jpd.llm.local_worker_main`), started on the first request, kept warm for the next
ones, and ended when idle (it exits by itself), with `aclose`, or with the daemon
(protocol.md 8.2). When it dies mid-request, the request fails with a `ProviderError`
that names the signal and what it likely means; the next request starts a new worker.

Requests are serialized (the model is one context), as in the in-process provider: one
request at a time owns the pipe and reads its replies itself, so no reader task is
needed. A request cancelled or abandoned mid-stream sends `Cancel` and reads on until
the worker confirms, so the pipe is in step for the next request.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from pathlib import Path

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from pydantic import ValidationError

from jpd.llm import local_frames as frames
from jpd.llm.base import EventStream, ModelRequest, StreamEvent
from jpd.llm.errors import ContextOverflow, ProviderError, ProviderUnavailable
from jpd.llm.local_format import token_bound, tool_plan

PORTABLE_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
)
"""The llama.cpp build the README and scripts/test.sh install (README "Install")."""
NO_AVX2_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF "
    "-DGGML_BMI2=OFF"
)
"""For an x86-64 CPU without AVX2 (SSE 4.2 and older only): slower (README "Install")."""
REINSTALL = (
    f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" pip install --force-reinstall --no-cache-dir '
    "--no-deps llama-cpp-python"
)

CANCEL_TIMEOUT = 10.0
"""How long a cancelled request waits for the worker to stop before killing it."""
EXIT_TIMEOUT = 5.0

_LIKELY = {
    signal.SIGILL: "the llama.cpp build uses CPU instructions this machine cannot run; "
    f"reinstall llama-cpp-python with {REINSTALL} (on a CPU without AVX2: "
    f'CMAKE_ARGS="{NO_AVX2_CMAKE_ARGS}")',
    signal.SIGSEGV: "llama.cpp crashed: a damaged or unsupported model file, or a llama.cpp bug",
    signal.SIGBUS: "llama.cpp crashed: the model file changed or was truncated while mapped",
    signal.SIGABRT: "llama.cpp aborted on a failed check: an unsupported model file or a bug",
    signal.SIGFPE: "llama.cpp crashed on an arithmetic fault: a llama.cpp bug",
    signal.SIGKILL: "it was killed, most often by the kernel for lack of memory (see `dmesg`): "
    "try a smaller providers.local.n_ctx or model",
    signal.SIGTERM: "another process stopped it",
}

log = logging.getLogger(__name__)


def death_message(returncode: int) -> str:
    """One line on how the worker ended and what that likely means."""
    if returncode < 0:
        try:
            number = signal.Signals(-returncode)
        except ValueError:
            how = f"died of signal {-returncode}"
            likely = None
        else:
            how = f"died of {number.name} ({signal.strsignal(number)})"
            likely = _LIKELY.get(number)
    else:
        how, likely = f"exited with status {returncode}", None
    message = f"the local model's worker process {how}"
    if likely:
        message += f": {likely}"
    return message + ". Other conversations go on; the next local turn starts a new worker"


def worker_command(settings: frames.WorkerSettings) -> list[str]:
    """The worker's command line."""
    return [sys.executable, "-m", "jpd.llm.local_worker_main", settings.model_dump_json()]


class WorkerGone(Exception):
    """The worker ended; `returncode` is its exit status (negative: a signal)."""

    def __init__(self, returncode: int) -> None:
        super().__init__(death_message(returncode))
        self.returncode = returncode


class _Worker:
    """One running worker process and its pipes."""

    def __init__(self, process: Process) -> None:
        self.process = process
        assert process.stdin is not None and process.stdout is not None
        self._stdin = process.stdin
        self._replies = BufferedByteReceiveStream(process.stdout)
        self.last_used = time.monotonic()

    @classmethod
    async def start(cls, settings: frames.WorkerSettings) -> _Worker:
        command = worker_command(settings)
        try:
            process = await anyio.open_process(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=None,  # the daemon's: its log
                start_new_session=True,  # a terminal's Ctrl-C is the daemon's to handle
            )
        except OSError as exc:
            raise ProviderUnavailable(f"cannot start the local model's worker: {exc}") from exc
        log.info("started local model worker %d", process.pid)
        return cls(process)

    async def send(self, frame: frames.Generate | frames.CountTokens | frames.Cancel) -> None:
        try:
            await frames.send(self._stdin, frame)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            raise await self._gone() from None

    async def receive(self) -> frames.Reply:
        try:
            body = await frames.receive_body(self._replies)
            return frames.REPLY.validate_json(body)
        except (
            anyio.IncompleteRead,
            anyio.EndOfStream,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
        ):
            raise await self._gone() from None
        except (frames.FrameError, ValidationError) as exc:
            await self.kill()
            raise ProviderError(f"the local model's worker sent a malformed reply: {exc}") from exc

    async def _gone(self) -> WorkerGone:
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(EXIT_TIMEOUT):
                await self.process.wait()
            if self.process.returncode is None:
                await self.kill()  # closed its stdout but lives on: not ours any more
            await self.process.aclose()  # its pipes
        assert self.process.returncode is not None
        return WorkerGone(self.process.returncode)

    async def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        with anyio.CancelScope(shield=True):
            await self.process.aclose()

    async def stop(self) -> None:
        """Close its stdin (it exits), then wait; kill it if it does not exit."""
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(OSError, anyio.BrokenResourceError):
                await self._stdin.aclose()
            with anyio.move_on_after(EXIT_TIMEOUT):
                await self.process.aclose()
                return
            log.warning("local model worker %d did not exit: killing it", self.process.pid)
            await self.kill()


class LocalWorkerProvider:
    """The `local` provider (`local/smollm2`, `local/<path to .gguf>`) in a worker."""

    name = "local"
    refuses_forced_tool_with_reasoning = False
    constrains_decoding = True  # the worker runs jpd.llm.local, which pins with a grammar

    def __init__(
        self,
        model_path: Path | None = None,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        seed: int = 0,
        idle_timeout: float = 600.0,
    ) -> None:
        self._settings = frames.WorkerSettings(
            parent=os.getpid(),
            model_path=None if model_path is None else str(model_path),
            n_ctx=n_ctx,
            n_threads=n_threads,
            seed=seed,
            idle_timeout=idle_timeout,
            log_level=logging.getLogger().getEffectiveLevel(),
        )
        self._worker: _Worker | None = None
        self._serial = anyio.Semaphore(1)  # not a Lock: see jpd.llm.local
        self._ids = 0

    @property
    def context_window(self) -> int:
        """The context size the worker loads models with (`providers.local.n_ctx`)."""
        return self._settings.n_ctx

    @property
    def worker_pid(self) -> int | None:
        """The running worker's pid (None: none is running)."""
        return None if self._worker is None else self._worker.process.pid

    def stream(self, request: ModelRequest) -> EventStream:
        """Generate a reply in the worker: text deltas (or one forced tool call), usage,
        then finish."""
        return aclosing(self._events(request))

    async def _events(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        if tool_plan(request) is None:  # the model reads no tools then: not worth the pipe
            request = request.model_copy(update={"tools": ()})
        async with self._serial:
            worker, id_ = await self._send(lambda id_: frames.Generate(id=id_, request=request))
            finished = False
            try:
                while True:
                    reply = await self._receive(worker, id_)
                    if isinstance(reply, frames.Events):
                        for event in reply.events:
                            yield event
                    elif isinstance(reply, frames.Failed):
                        finished = True
                        raise _failure(reply)
                    else:
                        finished = True
                        return
            finally:
                if not finished:
                    await self._cancel(worker, id_)

    def token_bound(self, request: ModelRequest) -> int:
        """An upper bound of `count_tokens(request)` from the text alone (no worker trip)."""
        return token_bound(request)

    async def count_tokens(self, request: ModelRequest) -> int:
        """The exact number of prompt tokens `request` makes for this model (loads it)."""
        async with self._serial:
            worker, id_ = await self._send(lambda id_: frames.CountTokens(id=id_, request=request))
            try:
                reply = await self._receive(worker, id_)
            except BaseException:
                await self._finish(worker, id_)  # the next request must not read its reply
                raise
            if isinstance(reply, frames.Count):
                return reply.tokens
            if isinstance(reply, frames.Failed):
                raise _failure(reply)
            raise ProviderError(f"the local model's worker answered {reply.op!r} to a count")

    async def aclose(self) -> None:
        """End the worker (waits for a running request to finish)."""
        async with self._serial:
            worker, self._worker = self._worker, None
            if worker is not None:
                await worker.stop()

    # --- internals: callers hold `_serial` ------------------------------------------

    async def _send(
        self, make: Callable[[int], frames.Generate | frames.CountTokens]
    ) -> tuple[_Worker, int]:
        """Send a command to the worker, starting one first if none runs."""
        for attempt in (1, 2):
            worker = await self._running()
            self._ids += 1
            try:
                await worker.send(make(self._ids))
            except WorkerGone as gone:
                self._worker = None
                # A worker that had just exited when idle: start another, once.
                if gone.returncode == 0 and attempt == 1:
                    continue
                raise ProviderError(str(gone)) from None
            worker.last_used = time.monotonic()
            return worker, self._ids
        raise AssertionError("unreachable")

    async def _receive(self, worker: _Worker, id_: int) -> frames.Reply:
        while True:
            try:
                reply = await worker.receive()
            except WorkerGone as gone:
                if self._worker is worker:
                    self._worker = None
                if gone.returncode != 0:
                    log.error("%s", gone)
                raise ProviderError(str(gone)) from None
            except ProviderError:
                self._worker = None if self._worker is worker else self._worker
                raise
            worker.last_used = time.monotonic()
            if reply.id == id_:
                return reply

    async def _running(self) -> _Worker:
        worker = self._worker
        if worker is not None:
            # Close to its idle exit: a new one is as quick and never races it.
            fresh = time.monotonic() - worker.last_used < self._settings.idle_timeout - 1.0
            if fresh and worker.process.returncode is None:
                return worker
            self._worker = None
            await worker.stop()
        self._worker = await _Worker.start(self._settings)
        return self._worker

    async def _cancel(self, worker: _Worker, id_: int) -> None:
        """Stop generation `id_`, then `_finish` it."""
        if worker.process.returncode is not None:
            return  # died: nothing to stop or read
        with anyio.CancelScope(shield=True):
            try:
                await worker.send(frames.Cancel(id=id_))
            except WorkerGone:
                return  # nothing left to read
            await self._finish(worker, id_)

    async def _finish(self, worker: _Worker, id_: int) -> None:
        """Read request `id_`'s replies up to its last (kill the worker on timeout)."""
        if worker.process.returncode is not None:
            return
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(CANCEL_TIMEOUT):
                try:
                    while not isinstance(
                        await self._receive(worker, id_), frames.Done | frames.Failed | frames.Count
                    ):
                        pass
                except ProviderError:
                    pass  # the worker is gone and forgotten
                return
            log.warning("local model worker did not end a cancelled request: killing it")
            await self._drop(worker)

    async def _drop(self, worker: _Worker) -> None:
        if self._worker is worker:
            self._worker = None
        await worker.kill()


def _failure(reply: frames.Failed) -> ProviderError:
    if reply.unavailable:
        return ProviderUnavailable(reply.message)
    if reply.overflow:
        return ContextOverflow(reply.message)
    return ProviderError(reply.message)
