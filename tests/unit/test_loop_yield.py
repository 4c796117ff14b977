"""The event loop's thread steps aside for a control thread with input (jpd.rpc.loop_yield):
the kernel signals that thread when a watched descriptor gets input; its handler waits
until each watched thread with input (busy, or bytes unread) took its turn, and never
for one that waits for the loop or was forgotten.

No timed assertions: the handler's cap is raised so the order of events, not a clock,
shows that it waited; waits have generous timeouts only so a failure does not hang.
"""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from jpd.rpc import loop_yield
from jpd.rpc.loop_yield import Yielding
from jpd.rpc.socket_lane import LaneConnection

_F_GETSIG = 11
_F_GETOWN_EX = 16
_SAFETY = 30.0


@pytest.fixture
def restore_handler() -> Iterator[None]:
    before = signal.getsignal(loop_yield.SIGNAL)
    try:
        yield
    finally:
        signal.signal(loop_yield.SIGNAL, before)


@pytest.fixture
def yielding(restore_handler: None, monkeypatch: pytest.MonkeyPatch) -> Yielding:
    monkeypatch.setattr(loop_yield, "MAX_WAIT", _SAFETY)
    found = Yielding()
    assert found.install()
    return found


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    client, daemon = socket.socketpair()
    daemon.setblocking(False)
    with client, daemon:
        yield client, daemon


def _when_waiting(yielding: Yielding, then: list[str], step: threading.Event) -> None:
    """In a thread: once the handler waits, note it and let the test go on."""
    for _ in range(int(_SAFETY / 0.01)):
        if yielding._waiting:
            then.append("thread ran while the loop waited")
            step.set()
            return
        threading.Event().wait(0.01)


def test_a_watched_descriptor_signals_the_loop_thread(
    yielding: Yielding, pair: tuple[socket.socket, socket.socket]
) -> None:
    _client, daemon = pair
    yielding.watch(daemon.fileno())
    owner_type, owner = struct.unpack("ii", fcntl.fcntl(daemon.fileno(), _F_GETOWN_EX, bytes(8)))
    assert (owner_type, owner) == (0, threading.get_native_id())  # F_OWNER_TID: this thread
    assert fcntl.fcntl(daemon.fileno(), _F_GETSIG) == loop_yield.SIGNAL
    assert fcntl.fcntl(daemon.fileno(), fcntl.F_GETFL) & os.O_ASYNC


def test_input_runs_the_handler_on_the_loop_thread(
    restore_handler: None, pair: tuple[socket.socket, socket.socket]
) -> None:
    ran: list[int] = []

    class Counting(Yielding):
        def _on_signal(self, signum: int, frame: object) -> None:
            ran.append(threading.get_native_id())

    counting = Counting()
    assert counting.install()
    client, daemon = pair
    counting.watch(daemon.fileno())
    threading.Thread(target=client.send, args=(b"x",)).start()
    for _ in range(int(_SAFETY / 0.01)):
        if ran:
            break
        threading.Event().wait(0.01)  # Python runs the handler between bytecodes here
    assert ran and set(ran) == {threading.get_native_id()}


def test_the_handler_waits_until_a_busy_thread_is_done(
    yielding: Yielding, pair: tuple[socket.socket, socket.socket]
) -> None:
    _client, daemon = pair
    watched = yielding.watch(daemon.fileno())
    watched.woke()
    order: list[str] = []
    step = threading.Event()

    def thread() -> None:
        _when_waiting(yielding, order, step)
        watched.done()

    threading.Thread(target=thread).start()
    yielding._on_signal(loop_yield.SIGNAL, None)
    order.append("loop went on")
    assert order == ["thread ran while the loop waited", "loop went on"]


def test_unread_input_is_waited_for_until_the_thread_read_it(
    yielding: Yielding, pair: tuple[socket.socket, socket.socket]
) -> None:
    client, daemon = pair
    watched = yielding.watch(daemon.fileno())
    order: list[str] = []
    step, sent = threading.Event(), threading.Event()

    def thread() -> None:
        client.send(b"a request")  # the kernel signals the loop's thread: its handler waits
        sent.set()
        _when_waiting(yielding, order, step)
        watched.woke()
        assert daemon.recv(100) == b"a request"
        watched.done()

    threading.Thread(target=thread).start()
    assert sent.wait(_SAFETY)
    yielding._on_signal(loop_yield.SIGNAL, None)  # as the signal would, if not yet
    order.append("loop went on")
    assert order == ["thread ran while the loop waited", "loop went on"]


def test_no_wait_for_an_idle_thread_one_waiting_for_the_loop_or_one_forgotten(
    yielding: Yielding, pair: tuple[socket.socket, socket.socket]
) -> None:
    client, daemon = pair
    watched = yielding.watch(daemon.fileno())
    assert not yielding._pending()  # idle: nothing came
    watched.woke()
    assert yielding._pending()
    watched.waits_for_loop = True  # its queue to the loop is full: the loop must run
    assert not yielding._pending()
    watched.waits_for_loop = False
    watched.forget()  # its connection ended
    client.send(b"more")
    assert not yielding._pending()
    yielding._on_signal(loop_yield.SIGNAL, None)  # returns at once (else: the cap)


def test_off_the_main_thread_nothing_is_watched(
    restore_handler: None, pair: tuple[socket.socket, socket.socket]
) -> None:
    _client, daemon = pair
    found = Yielding()
    installed: list[bool] = []
    thread = threading.Thread(target=lambda: installed.append(found.install()))
    thread.start()
    thread.join(_SAFETY)
    assert installed == [False]
    found.watch(daemon.fileno())
    assert not fcntl.fcntl(daemon.fileno(), fcntl.F_GETFL) & os.O_ASYNC
    assert not found._watched


def test_a_socket_client_is_watched_until_its_connection_ends(
    restore_handler: None,
    pair: tuple[socket.socket, socket.socket],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = Yielding()
    assert found.install()
    monkeypatch.setattr("jpd.rpc.socket_lane.YIELDING", found)
    _client, daemon = pair
    lane = LaneConnection(socket.socket(fileno=os.dup(daemon.fileno())))
    assert lane.watched in found._watched
    lane.abandon()  # never served: the daemon stopped first
    assert not found._watched


def test_the_handler_never_raises_into_the_code_it_interrupted(
    yielding: Yielding, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It runs between two bytecodes of anything the loop's thread does (a turn's
    stream, say): a failure of its own must not become that code's exception."""

    def broken() -> bool:
        raise RuntimeError("Set changed size during iteration")

    monkeypatch.setattr(yielding, "_pending", broken)
    yielding._on_signal(loop_yield.SIGNAL, None)  # returns: logged, not raised


def test_a_signal_during_the_wait_does_not_wait_again(
    yielding: Yielding, pair: tuple[socket.socket, socket.socket]
) -> None:
    """A second signal runs the handler inside the first one's wait (the same thread):
    it returns at once, the first goes on waiting."""
    _client, daemon = pair
    watched = yielding.watch(daemon.fileno())
    watched.woke()
    waits: list[int] = []
    real_wait = yielding._cond.wait

    def wait(timeout: float | None = None) -> bool:
        waits.append(yielding._waiting)
        if len(waits) == 1:
            yielding._on_signal(loop_yield.SIGNAL, None)  # as a signal arriving now
            watched.done()
        return real_wait(0)

    yielding._cond.wait = wait  # type: ignore[method-assign]
    yielding._on_signal(loop_yield.SIGNAL, None)
    assert waits == [1] and yielding._waiting == 0
