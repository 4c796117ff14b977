"""`jp --stdio` ends its private daemon with `shutdown` and `exit` sent back to back
(`jpcli.stdio_daemon.StdioDaemon.close`): the real `jpd` reads them in order and exits
with 0, as after an awaited `shutdown` (protocol.md section 4)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from jpcli.rpc import Connection
from jpcli.stdio_daemon import StdioDaemon


def test_shutdown_then_exit_unawaited_ends_the_daemon_with_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("JP_CONFIG", str(tmp_path / "none.toml"))
    daemon = StdioDaemon(
        [sys.executable, "-m", "jpd"], workspace_root=str(tmp_path), log_file=tmp_path / "log"
    )
    connection = daemon.start()
    assert daemon.server_info["name"] == "jpd"
    assert connection.request("turn/list")["turns"] == []
    process = daemon._process
    assert process is not None
    daemon.close()
    assert process.returncode == 0, (tmp_path / "log").read_text()


def test_a_posted_request_is_sent_without_waiting() -> None:
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    with open(in_r, "rb", buffering=0) as reader, open(out_w, "wb") as writer:
        connection = Connection(reader, writer)
        connection.post("shutdown")
        connection.post("turn/list", {"a": 1})
        with open(out_r, "rb") as sent:
            os.close(in_w)  # the peer hangs up: the reader ends
            assert connection.wait_closed(5)
            connection.close()
            data = sent.read()
    assert data.count(b"Content-Length:") == 2
    assert b'"id":1,"method":"shutdown"' in data.replace(b" ", b"")
    assert b'"id":2,"method":"turn/list","params":{"a":1}' in data.replace(b" ", b"")
