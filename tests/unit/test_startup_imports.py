"""Start-up imports only what the first request needs (protocol.md section 4, "Start-up").

A fresh interpreter imports the daemon, serves one `initialize` on a pipe in-process
and reports `sys.modules`: providers, tools, inquiries, config models, the turn loop,
httpx, rich, MCP and the local model must still be unloaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SERVE_ONE_INITIALIZE = r"""
import json, os, sys
import anyio
from jpd.server import create_server
from jpd.settings import Settings

body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": 1, "clientInfo": {"name": "t"}}}).encode()
in_r, in_w = os.pipe()
out_r, out_w = os.pipe()
os.write(in_w, b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
os.close(in_w)  # end of input after initialize: the connection ends
anyio.run(create_server(Settings.from_env()).run_stdio, in_r, out_w)
answer = os.read(out_r, 65536)
assert b'"result"' in answer and b'"serverInfo"' in answer, answer
print(json.dumps(sorted(sys.modules)))
"""

# Module prefixes the first request does not need; each loads on first use.
NOT_AT_START_UP = (
    "httpx",
    "httpcore",
    "rich",
    "prompt_toolkit",
    "llama_cpp",
    "mcp",
    "jpd.config",
    "jpd.core.turn",
    "jpd.tools",
    "jpd.llm.base",
    "jpd.llm.anthropic",
    "jpd.llm.openai",
    "jpd.llm.local",
    "jpd.llm.transport",
    "jpd.llm.history",
    "jpd.inquiry.backend",
    "jpd.inquiry.router",
    "jpd.mcp",
)


def test_initialize_loads_no_provider_tool_or_config_module(tmp_path: Path) -> None:
    env = {**os.environ, "JP_DATA_DIR": str(tmp_path / "data"), "JP_CONFIG": "/nonexistent"}
    proc = subprocess.run(
        [sys.executable, "-c", SERVE_ONE_INITIALIZE],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    crept = [m for m in loaded if any(m == p or m.startswith(p + ".") for p in NOT_AT_START_UP)]
    assert crept == [], f"imported at start-up but not needed by initialize: {crept}"
