"""A plain turn (no attachments, no tool call) loads only what it uses: the readers of
attachments (`html.parser` for web pages, globbing, fetching) load with the first
turn that has some (protocol.md section 4, "Start-up": everything else loads when first
used). A fresh interpreter serves `initialize` and one scripted turn in-process, then
reports `sys.modules`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ONE_TURN = r"""
import json, os, sys, threading
import anyio
from jpd.server import create_server
from jpd.settings import Settings

def frame(message):
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)

in_r, in_w = os.pipe()
out_r, out_w = os.pipe()

def client():
    os.write(in_w, frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                          "params": {"protocolVersion": 1, "clientInfo": {"name": "t"}}}))
    os.write(in_w, frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    os.write(in_w, frame({"jsonrpc": "2.0", "id": 2, "method": "turn/start",
                          "params": {"message": "ping"}}))
    seen = b""
    while b"turn_completed" not in seen:
        chunk = os.read(out_r, 65536)
        assert chunk, seen
        seen += chunk
    assert b'"stopReason":"end_turn"' in seen.replace(b" ", b""), seen
    os.close(in_w)  # end of input: the connection ends

threading.Thread(target=client, daemon=True).start()
anyio.run(create_server(Settings.from_env()).run_stdio, in_r, out_w)
print(json.dumps(sorted(sys.modules)))
"""

# Loaded by the first turn that has attachments (or fetches a web page), not before.
NOT_FOR_A_PLAIN_TURN = ("html", "jpd.core.attachments", "jpd.core.html_text")


def test_a_plain_turn_loads_no_attachment_reader(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": [{"text": "ok"}]}))
    config = tmp_path / "config.toml"
    config.write_text(f'[assistant.model]\nid = "test/x"\n[providers.test]\nscript = "{script}"\n')
    env = {**os.environ, "JP_DATA_DIR": str(tmp_path / "data"), "JP_CONFIG": str(config)}
    proc = subprocess.run(
        [sys.executable, "-c", ONE_TURN],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "jpd.core.turn" in loaded  # the turn did run here
    crept = [
        m for m in loaded if any(m == p or m.startswith(p + ".") for p in NOT_FOR_A_PLAIN_TURN)
    ]
    assert crept == [], f"loaded by a turn without attachments: {crept}"
