"""The daemon frames every message it sends as protocol.md section 2 says."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.harness import INIT_PARAMS
from tests.e2e.rawclient import RawJpd


def test_daemon_sends_only_a_content_length_header(home: Path) -> None:
    raw = RawJpd({"JP_DATA_DIR": str(home / "data"), "JPD_LOG_LEVEL": "WARNING"})
    raw.write(b"garbage\r\n\r\n")  # an error frame the daemon writes itself
    assert raw.read()["error"]["code"] == -32700
    raw.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS})
    assert raw.read()["id"] == 1  # a response pygls sends
    raw.send({"jsonrpc": "2.0", "id": 2, "method": "no/such"})
    assert raw.read()["error"]["code"] == -32601
    for header in raw.headers:
        lines = header.split(b"\r\n")
        assert len(lines) == 1 and lines[0].startswith(b"Content-Length: "), header
    raw.send({"jsonrpc": "2.0", "method": "exit"})
    code, _ = raw.close()
    assert code == 1
