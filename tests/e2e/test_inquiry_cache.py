"""RFD 033 on the wire (protocol.md 10.4): on a hosted provider the inquiry's side
request re-sends the parent request's prefix byte for byte (tools, `tool_choice`,
system, earlier messages), so only the question is uncached; an invalid answer goes
back as an error result and is asked again on the same prefix.

The bodies are the real HTTP bodies the provider modules send to the fake API server
(tests/fixtures/fake_llm_server.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import StartJpd
from tests.e2e.hosted import CLAUDE, OPENAI_CHAT, OPENAI_KEY, anthropic_env, plain
from tests.e2e.test_inquiries import asker
from tests.e2e.test_tools import results
from tests.e2e.tools import make_tool, tool_toml
from tests.fixtures.fake_llm_server import FakeLLMServer, Reply
from tests.fixtures.llm_wire import (
    a_text_answer,
    a_tool_answer,
    o_chunk,
    o_done,
    o_text_answer,
    o_usage,
    stream_reply,
)

PROVIDERS = ("anthropic", "openai", "openai-compatible")
TOOL = tool_toml("asker", "{command}", run='"unattended"') + 'questions.q.target = "assistant"\n'


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


def tool_reply(provider: str, call_id: str, name: str, arguments: dict[str, Any]) -> Reply:
    """The API's streamed answer calling one tool."""
    encoded = json.dumps(arguments)
    if provider == "anthropic":
        return stream_reply(*a_tool_answer(call_id, name, encoded))
    call = {"index": 0, "id": call_id, "type": "function"}
    return stream_reply(
        o_chunk({"role": "assistant", "content": None}),
        o_chunk({"tool_calls": [{**call, "function": {"name": name, "arguments": encoded}}]}),
        o_chunk({}, finish_reason="tool_calls"),
        o_chunk(usage=o_usage(50, 12), choices=False),
        o_done(),
    )


def text_reply(provider: str, words: str) -> Reply:
    if provider == "anthropic":
        return stream_reply(*a_text_answer(words))
    return stream_reply(*o_text_answer(words))


def settings(provider: str, fake: FakeLLMServer) -> dict[str, Any]:
    """`jpd_factory` arguments for `provider` against the fake server."""
    if provider == "anthropic":
        return {"model": CLAUDE, "env": anthropic_env(fake), "config": ""}
    if provider == "openai":
        env = {"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": f"{fake.base_url}/v1"}
        return {"model": "openai/gpt-x", "env": env, "config": OPENAI_CHAT}
    config = f'[providers.openai_compatible]\nbase_url = "{fake.base_url}/v1"\n'
    return {"model": "openai-compatible/m", "env": {}, "config": config}


def split(raw: bytes) -> tuple[bytes, bytes, bytes]:
    """A body's bytes before its messages, its messages array, and the bytes after it
    (every builder writes `messages` before `tools`)."""
    start = raw.index(b'"messages":')
    end = raw.index(b',"tools":')
    return raw[:start], raw[start:end], raw[end:]


def assert_same_prefix(provider: str, parent: bytes, side: bytes) -> None:
    """Everything but the messages is the parent's byte for byte; the parent's messages
    start the side request's (Anthropic: but for the cache breakpoints it moves onto
    the newest turns, which mark where to cache and are not cached content)."""
    head, parent_messages, tail = split(parent)
    side_head, side_messages, side_tail = split(side)
    assert side_head == head and side_tail == tail
    if provider != "anthropic":
        assert side_messages.startswith(parent_messages[:-1])  # without its closing `]`
        return
    before = json.loads(parent)["messages"]
    after = json.loads(side)["messages"][: len(before)]
    assert [plain(m["content"]) for m in after] == [plain(m["content"]) for m in before]
    assert [m["role"] for m in after] == [m["role"] for m in before]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_side_request_resends_the_parent_prefix_byte_for_byte(
    jpd_factory: StartJpd, home: Any, fake: FakeLLMServer, provider: str
) -> None:
    fake.push(
        tool_reply(provider, "call_1", "asker", {}),
        tool_reply(
            provider, "ans_1", "answer_inquiry", {"inquiry_id": "call_1.q.1", "answer": "true"}
        ),
        text_reply(provider, "done"),
    )
    command = make_tool(home, "asker", asker())
    opts = settings(provider, fake)
    daemon = await jpd_factory(
        model=opts["model"],
        env=opts["env"],
        config='[assistant]\nsystem_prompt = "You are terse."\n'
        + opts["config"]
        + TOOL.format(command=command),
    )
    await daemon.initialize()
    started, events = await daemon.run_turn("go")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    [result] = results(daemon, started["turnId"])
    assert result["content"].strip() == "got=true"

    parent, side, follow = (r.body for r in fake.requests)
    assert_same_prefix(provider, parent, side)
    body = json.loads(side)
    assert body["tool_choice"] == json.loads(parent)["tool_choice"]
    assert 'inquiry_id \\"call_1.q.1\\"' in json.dumps(body["messages"][-1])
    assert b"answer_inquiry" not in split(follow)[1]  # the side request left no trace


async def test_an_invalid_answer_is_asked_again_on_the_same_prefix(
    jpd_factory: StartJpd, home: Any, fake: FakeLLMServer
) -> None:
    """protocol.md 10.4: a wrong id and a wrong value go back as error results; each
    retry keeps the parent's tools and `tool_choice`."""
    fake.push(
        tool_reply("anthropic", "call_1", "asker", {}),
        tool_reply("anthropic", "a1", "answer_inquiry", {"inquiry_id": "x.q.1", "answer": "true"}),
        tool_reply(
            "anthropic", "a2", "answer_inquiry", {"inquiry_id": "call_1.q.1", "answer": "yes"}
        ),
        tool_reply(
            "anthropic", "a3", "answer_inquiry", {"inquiry_id": "call_1.q.1", "answer": "false"}
        ),
        text_reply("anthropic", "done"),
    )
    command = make_tool(home, "asker", asker())
    daemon = await jpd_factory(
        model=CLAUDE, env=anthropic_env(fake), config=TOOL.format(command=command)
    )
    await daemon.initialize()
    started, _ = await daemon.run_turn("go")
    [result] = results(daemon, started["turnId"])
    assert result["content"].strip() == "got=false"

    parent, *sides, _ = (r.body for r in fake.requests)
    assert len(sides) == 3
    for side in sides:
        assert_same_prefix("anthropic", parent, side)
    errors = [
        block["content"]
        for message in json.loads(sides[-1])["messages"]
        for block in message["content"]
        if block.get("type") == "tool_result" and block.get("is_error")
    ]
    assert errors[0].startswith("Invalid answer: inquiry_id must be 'call_1.q.1', got 'x.q.1'")
    assert errors[1].startswith("Invalid answer: ") and "yes" in errors[1]
