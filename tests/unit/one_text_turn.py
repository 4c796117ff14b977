"""One turn answered in text, run in a fresh interpreter: `initialize` and a scripted
turn served in-process over pipes, then `sys.modules` reported. What a plain turn loads
is checked against what only some turns need (`test_deferred_tools`, `test_turn_imports`:
protocol.md section 4, "Start-up": everything else loads when first used)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

RUN_ONE_TEXT_TURN = r"""
import json, os, sys, threading
import anyio
from jpd.server import create_server
from jpd.settings import Settings

in_r, in_w = os.pipe()
out_r, out_w = os.pipe()

def send(message):
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    os.write(in_w, b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

def client():
    send({"id": 1, "method": "initialize",
          "params": {"protocolVersion": 1, "clientInfo": {"name": "t"}}})
    seen = b""
    while b'"serverInfo"' not in seen:
        seen += os.read(out_r, 65536)
    send({"method": "initialized", "params": {}})
    send({"id": 2, "method": "turn/start",
          "params": {"message": "hi"}})
    while b'"turn_completed"' not in seen and b'"error"' not in seen:
        chunk = os.read(out_r, 65536)
        if not chunk:
            break
        seen += chunk
    os.close(in_w)  # end of input: the daemon stops
    print(json.dumps({"completed": b'"turn_completed"' in seen,
                      "endTurn": b'"stopReason":"end_turn"' in seen.replace(b" ", b""),
                      "tail": seen[-300:].decode()}))

reader = threading.Thread(target=client)
reader.start()
anyio.run(create_server(Settings.from_env()).run_stdio, in_r, out_w)
reader.join()
print(json.dumps(sorted(sys.modules)))
"""


def modules_after_one_text_turn(tmp_path: Path) -> tuple[dict[str, Any], list[str]]:
    """(the client's report: `completed`, `endTurn`, `tail`; the modules loaded after
    the turn)."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": [{"text": "hello"}]}))
    config = tmp_path / "config.toml"
    config.write_text(f'[assistant.model]\nid = "test/x"\n[providers.test]\nscript = "{script}"\n')
    env = {**os.environ, "JP_CONFIG": str(config), "JP_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.run(
        [sys.executable, "-c", RUN_ONE_TEXT_TURN],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    report, loaded = (json.loads(line) for line in proc.stdout.strip().splitlines()[-2:])
    return report, loaded
