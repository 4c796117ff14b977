"""One thread for every call into llama.cpp's native code in this process.

llama.cpp parallelises with OpenMP, and libgomp keeps a team of threads per calling
thread. Calls made from anyio's pool of worker threads leave several teams alive; with
more OpenMP threads than cores, libgomp stops spinning at its barriers and sleeps in the
kernel instead, and on 2 cores a short prompt then took 1.6x as long to evaluate (77
against 47 ms, measured side by side). One long-lived thread keeps a single team.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

T = TypeVar("T")

_jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
_started = threading.Lock()
_thread: threading.Thread | None = None


def _serve() -> None:
    while True:
        _jobs.get()()


def _ensure_thread() -> None:
    global _thread
    with _started:
        if _thread is None:
            # A daemon thread: a process ending mid-call must not wait for llama.cpp.
            _thread = threading.Thread(target=_serve, name="jpd-model", daemon=True)
            _thread.start()


async def run_on_model_thread(func: Callable[..., T], *args: object) -> T:
    """`func(*args)` on the model thread, in order with every other such call.

    Like `anyio.to_thread.run_sync`, a cancelled caller still waits for the call to
    end (the model is not safe to touch meanwhile), then sees the cancellation.
    """
    token = anyio.lowlevel.current_token()
    done = anyio.Event()
    outcome: list[tuple[bool, object]] = []

    def job() -> None:
        try:
            outcome.append((True, func(*args)))
        except BaseException as exc:  # handed to the caller, raised there
            outcome.append((False, exc))
        with contextlib.suppress(anyio.RunFinishedError):  # the caller's loop is gone
            anyio.from_thread.run_sync(done.set, token=token)

    _ensure_thread()
    _jobs.put(job)
    with anyio.CancelScope(shield=True):
        await done.wait()
    await anyio.lowlevel.checkpoint_if_cancelled()
    ok, value = outcome[0]
    if not ok:
        assert isinstance(value, BaseException)
        raise value
    return value  # type: ignore[return-value]  # func's own result
