"""Start-up imports only what the first request needs (protocol.md section 4, "Start-up").

A fresh interpreter imports the daemon, serves one `initialize` on a pipe in-process
and reports `sys.modules`: providers, tools, inquiries, config models, the turn loop,
httpx, rich, MCP and the local model must still be unloaded. The pydantic models that
are loaded build their validators on first use: only those of `initialize` are built.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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
from pydantic import BaseModel

def subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from subclasses(sub)

models = [m for m in subclasses(BaseModel) if m.__module__.startswith("jpd.")]
built = sorted(m.__qualname__ for m in models if m.__pydantic_complete__)
print(json.dumps({"modules": sorted(sys.modules), "models": len(models), "built": built}))
"""

# Module prefixes the first request does not need; each loads on first use.
NOT_AT_START_UP = (
    "httpx",
    "httpcore",
    "aiohttp",
    "httpx_aiohttp",
    "rich",
    "prompt_toolkit",
    "llama_cpp",
    "mcp",
    "google",
    "ollama",
    "jpd.config",
    "jpd.core.turn",
    "jpd.tools",
    "jpd.llm.base",
    "jpd.llm.anthropic",
    "jpd.llm.openai",
    "jpd.llm.google",
    "jpd.llm.ollama",
    "jpd.llm.http_provider",
    "jpd.llm.local",
    "jpd.llm.transport",
    "jpd.llm.history",
    "jpd.inquiry.backend",
    "jpd.inquiry.router",
    "jpd.mcp",
    "jpd.rpc.listener",  # the Unix socket's: a daemon on stdio never needs it
    "jpd.rpc.socket_claim",
    # The Postgres store: only with a store URL configured (a fleet member).
    "jpd.conversation.pg",
    "jpd.core.takeover",
    "jpd.core.shared_questions",
    "jpd.core.follow",
    "jpd.core.store_import",
    "psycopg",
    "psycopg_pool",
)


# The only validators `initialize` builds: its params, its result and what they nest.
BUILT_BY_INITIALIZE = {
    "InitializeParams",
    "ClientCapabilitiesParams",
    "ClientCapabilities",
    "InitializeResult",
    "ServerInfo",
    "ServerCapabilities",
}


def _serve_one_initialize(tmp_path: Path) -> dict[str, Any]:
    env = {**os.environ, "JP_DATA_DIR": str(tmp_path / "data"), "JP_CONFIG": "/nonexistent"}
    proc = subprocess.run(
        [sys.executable, "-c", SERVE_ONE_INITIALIZE],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return report


def test_initialize_loads_no_provider_tool_or_config_module(tmp_path: Path) -> None:
    loaded = _serve_one_initialize(tmp_path)["modules"]
    crept = [m for m in loaded if any(m == p or m.startswith(p + ".") for p in NOT_AT_START_UP)]
    assert crept == [], f"imported at start-up but not needed by initialize: {crept}"


def test_initialize_builds_only_its_own_validators(tmp_path: Path) -> None:
    report = _serve_one_initialize(tmp_path)
    # Wire models, question models and persisted events are loaded, but unbuilt.
    assert report["models"] > 50
    assert set(report["built"]) <= BUILT_BY_INITIALIZE, report["built"]
