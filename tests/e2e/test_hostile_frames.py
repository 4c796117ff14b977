"""Hostile frames against the real daemon (protocol.md sections 2, 3 and 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.harness import INIT_PARAMS
from tests.e2e.rawclient import RawJpd


@pytest.fixture
def raw(home: Path) -> RawJpd:
    raw = RawJpd({"JP_DATA_DIR": str(home / "data"), "JPD_LOG_LEVEL": "WARNING"})
    raw.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT_PARAMS})
    assert raw.read()["id"] == 0
    return raw


def test_every_request_is_answered_and_nothing_leaks(raw: RawJpd) -> None:
    for bad in ([], {}, 1.5, True, None):
        raw.send({"jsonrpc": "2.0", "id": bad, "method": "turn/list"})
        reply = raw.read()
        assert reply["id"] is None and reply["error"]["code"] == -32600, reply
    raw.send({"jsonrpc": "2.0", "id": 5, "method": "$/cancelRequest", "params": {"id": 1}})
    assert raw.read() == {
        "jsonrpc": "2.0",
        "id": 5,
        "error": {
            "code": -32601,
            "message": "method not found: $/cancelRequest is a notification "
            "(send it without an id)",
        },
    }
    deep = (
        '{"jsonrpc": "2.0", "id": 6, "method": "turn/start", "params": {"message": "x", "config": '
    )
    body = (deep + "[" * 1500 + "]" * 1500 + "}}").encode()
    raw.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    reply = raw.read()
    assert reply["error"]["code"] == -32700 and "nested deeper" in reply["error"]["message"]
    raw.send({"jsonrpc": "2.0", "id": 7, "method": "conversation/list"})
    assert raw.read() == {"jsonrpc": "2.0", "id": 7, "result": {"conversations": []}}
    code, stderr = raw.close()
    assert code == 1 and "Traceback" not in stderr


@pytest.mark.parametrize(("shutdown", "expected"), [(True, 0), (False, 1)])
def test_exit_follows_lsp_whatever_its_params(raw: RawJpd, shutdown: bool, expected: int) -> None:
    if shutdown:
        raw.send({"jsonrpc": "2.0", "id": 1, "method": "shutdown"})
        assert raw.read()["result"] is None
    raw.send({"jsonrpc": "2.0", "method": "exit", "params": [1, {"odd": True}]})
    assert raw.proc.wait(30) == expected


def test_an_oversized_frame_is_refused_unread(raw: RawJpd) -> None:
    size = 64 * 1024 * 1024 + 1  # the default `daemon.max_frame_bytes`, plus one
    raw.write(b"Content-Length: %d\r\n\r\n" % size)
    reply = raw.read()  # refused from the header alone, before the body is sent
    assert reply["error"]["code"] == -32700 and "-byte limit" in reply["error"]["message"]
    chunk = b"x" * (1 << 20)
    for _ in range(64):
        raw.write(chunk)
    raw.write(b"x")
    raw.send({"jsonrpc": "2.0", "id": 1, "method": "conversation/list"})
    assert raw.read()["id"] == 1
    raw.close()
