"""A turn's tools are offered from the catalog; the machinery that runs them (router,
inquiry backends, permissions, local and MCP runners) is built on the first tool call
(`jpd.tools.deferred`), so a turn answered in text never loads it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio

from jpd.config.tools import ToolConfig
from jpd.inquiry.answer_tool import ANSWER_INQUIRY_TOOL
from jpd.llm.base import ToolCallPart
from jpd.tools.base import ResultCallback, ToolResultData
from jpd.tools.catalog import EffectiveTool
from jpd.tools.deferred import DeferredRunner


def tool(name: str, *, enabled: bool = True, hidden: bool = False) -> EffectiveTool:
    config = ToolConfig.model_validate(
        {"description": f"the {name} tool", "style": {"hidden": hidden}}
    )
    return EffectiveTool(
        name=name,
        source="local",
        config=config,
        enabled=enabled,
        schema={"type": "object"},
        builtin=None,
    )


class Runner:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def run(
        self, calls: Sequence[ToolCallPart], on_result: ResultCallback | None = None
    ) -> list[ToolResultData]:
        self.calls.append([c.id for c in calls])
        return [ToolResultData(id=c.id, content="ran", is_error=False) for c in calls]


def test_offers_and_styles_come_from_the_catalog_without_building() -> None:
    built: list[Runner] = []
    tools = {
        "b": tool("b", hidden=True),
        "a": tool("a"),
        "off": tool("off", enabled=False),
    }
    deferred = DeferredRunner(tools, lambda: built.append(Runner()) or built[-1])
    offered = deferred.definitions()
    assert [d.name for d in offered] == ["a", "b", ANSWER_INQUIRY_TOOL.name]
    assert deferred.hidden("b") and not deferred.hidden("a") and not deferred.hidden("nope")
    assert DeferredRunner({"off": tools["off"]}, Runner).definitions() == ()
    assert built == []


def test_the_runner_is_built_once_on_the_first_calls() -> None:
    built: list[Runner] = []

    def build() -> Runner:
        built.append(Runner())
        return built[-1]

    deferred = DeferredRunner({"a": tool("a")}, build)
    call = ToolCallPart(id="1", name="a", arguments={})

    async def main() -> None:
        first = await deferred.run([call])
        second = await deferred.run([call.model_copy(update={"id": "2"})])
        assert [r.id for r in first + second] == ["1", "2"]

    anyio.run(main)
    assert len(built) == 1 and built[0].calls == [["1"], ["2"]]


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
    print(json.dumps({"completed": b'"turn_completed"' in seen, "tail": seen[-300:].decode()}))

reader = threading.Thread(target=client)
reader.start()
anyio.run(create_server(Settings.from_env()).run_stdio, in_r, out_w)
reader.join()
print(json.dumps(sorted(m for m in sys.modules if m.startswith("jpd."))))
"""

# Loaded with a turn's first tool call, never for a turn answered in text.
FOR_TOOL_CALLS = (
    "jpd.tools.coordinator",
    "jpd.tools.local_runner",
    "jpd.tools.mcp_call",
    "jpd.tools.permissions",
    "jpd.inquiry.router",
    "jpd.inquiry.backend",
    "jpd.mcp.model",
    "jpd.mcp.manager",
)


def test_a_turn_answered_in_text_loads_no_tool_running_machinery(tmp_path: Path) -> None:
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
    assert report["completed"], report["tail"]
    assert "jpd.tools.deferred" in loaded and "jpd.core.turn" in loaded
    assert [m for m in FOR_TOOL_CALLS if m in loaded] == []
