"""Shared pieces of the hosted-provider end-to-end tests: fake keys, a tool script, and
helpers to read turn events, persisted events and recorded requests.

The fake server (tests/fixtures/fake_llm_server.py) runs in the test process on
127.0.0.1 and speaks each API's documented streaming wire format; the daemon finds
it through `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL` or the config's `base_url`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e.harness import Jpd, data_files
from tests.e2e.test_turns import disk_events
from tests.fixtures.fake_llm_server import FakeLLMServer, Recorded

KEY = "sk-ant-e2e-SECRET-5f1c9a7e3b"
OPENAI_KEY = "sk-e2e-SECRET-0b7d2e94aa"
CLAUDE = "anthropic/claude-x"
OPENAI_CHAT = '[providers.openai]\napi = "chat"\n'
"""`openai/<model>` on Chat Completions (the default is the Responses API)."""

ECHO = """
print(json.dumps({"type": "success", "content": "echo:" + args["text"]}))
"""
ECHO_PARAMS = 'parameters.text = { type = "string", required = true }\n'


def anthropic_env(fake: FakeLLMServer, **extra: str) -> dict[str, str]:
    """The daemon's environment for Anthropic: the fake key and the fake server's URL."""
    return {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake.base_url, **extra}


def texts(events: list[dict[str, Any]]) -> list[str]:
    return [e["event"]["text"] for e in events if e["event"]["kind"] == "text_delta"]


def of_kind(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["event"] for e in events if e["event"]["kind"] == kind]


def body(request: Recorded) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(request.body)
    return data


def plain(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Content blocks without `cache_control` (breakpoint placement is unit-tested)."""
    return [{k: v for k, v in block.items() if k != "cache_control"} for block in blocks]


def answers(home: Path, conversation_id: str) -> list[dict[str, Any]]:
    return [
        e
        for e in disk_events(home, conversation_id)
        if e["type"] == "chat_response" and "message" in e
    ]


def assert_no_secret(secret: str, daemon: Jpd, home: Path) -> None:
    """The key is nowhere: daemon stderr, any file in the data dir, any turn event."""
    assert daemon.stderr, "expected daemon logs to search"
    assert secret not in daemon.stderr.decode(errors="replace")
    files = data_files(home / "data")
    assert files
    for path, content in files.items():
        assert secret.encode() not in content, path
    assert secret not in json.dumps(daemon.events)
