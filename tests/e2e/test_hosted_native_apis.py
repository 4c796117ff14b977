"""Gemini, Ollama and OpenAI's Responses API end to end: a real `jpd` talking to a fake
of each wire format (SSE `streamGenerateContent`, NDJSON `/api/chat`, SSE `/v1/responses`),
a tool call run locally between two model calls, its result (and the model's reasoning
state) sent back in each format, the key never leaked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import StartJpd
from tests.e2e.hosted import (
    ECHO,
    ECHO_PARAMS,
    OPENAI_KEY,
    answers,
    assert_no_secret,
    body,
    of_kind,
    texts,
)
from tests.e2e.test_tools import results
from tests.e2e.tools import make_tool, tool_toml
from tests.fixtures.fake_llm_server import FakeLLMServer, Reply, Send
from tests.fixtures.llm_wire import json_reply, sse, stream_reply

GEMINI_KEY = "AIza-e2e-SECRET-77aa11bb22"


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


def g_chunk(*parts: dict[str, Any], finish: str | None = None) -> bytes:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish:
        candidate["finishReason"] = finish
    usage = {"promptTokenCount": 12, "candidatesTokenCount": 3, "totalTokenCount": 15}
    return sse({"candidates": [candidate], "usageMetadata": usage})


def o_line(**fields: Any) -> bytes:
    return (json.dumps({"model": "qwen3", **fields}) + "\n").encode()


async def test_gemini_tool_call_round_trip(
    jpd_factory: StartJpd, home: Path, fake: FakeLLMServer
) -> None:
    call = {"functionCall": {"name": "echo", "args": {"text": "hi"}}, "thoughtSignature": "U0lH"}
    fake.push(
        json_reply(503, {"error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}}),
        stream_reply(g_chunk({"text": "Let me echo."}), g_chunk(call, finish="STOP")),
        stream_reply(g_chunk({"text": "It said "}), g_chunk({"text": "hi."}, finish="STOP")),
    )
    command = make_tool(home, "echo", ECHO)
    daemon = await jpd_factory(
        model="google/gemini-x",
        env={"GEMINI_API_KEY": GEMINI_KEY},
        config=tool_toml("echo", command, run='"unattended"')
        + ECHO_PARAMS
        + f'[providers.google]\nbase_url = "{fake.base_url}/v1beta"\n',
    )
    await daemon.initialize()
    started, events = await daemon.run_turn("echo hi")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    assert len(of_kind(events, "retry")) == 1
    [tool_call] = of_kind(events, "tool_call")
    assert (tool_call["name"], tool_call["arguments"]) == ("echo", {"text": "hi"})
    [result] = results(daemon, started["turnId"])
    assert result["content"].strip() == "echo:hi"
    assert "".join(texts(events)).endswith("It said hi.")
    assert of_kind(events, "usage")[-1]["usage"] == {"inputTokens": 12, "outputTokens": 3}

    follow_up = body(fake.requests[-1])
    model_turn, user_turn = follow_up["contents"][-2:]
    assert model_turn["role"] == "model"
    assert model_turn["parts"][0] == {"text": "Let me echo."}
    sent_call = model_turn["parts"][1]
    assert sent_call["thoughtSignature"] == "U0lH"
    assert sent_call["functionCall"]["name"] == "echo"
    [response] = user_turn["parts"]
    assert response["functionResponse"]["name"] == "echo"
    assert response["functionResponse"]["id"] == tool_call["id"]
    assert response["functionResponse"]["response"]["content"].strip() == "echo:hi"
    assert all(r.headers["x-goog-api-key"] == GEMINI_KEY for r in fake.requests)
    assert all(GEMINI_KEY not in r.path for r in fake.requests)
    assert answers(home, started["conversationId"])[-1]["message"] == "It said hi."
    assert_no_secret(GEMINI_KEY, daemon, home)


async def test_ollama_tool_call_round_trip_with_num_ctx(
    jpd_factory: StartJpd, home: Path, fake: FakeLLMServer
) -> None:
    calls = [{"function": {"name": "echo", "arguments": {"text": "hi"}}}]
    fake.push(
        Reply(
            body=(
                Send(o_line(message={"role": "assistant", "content": "", "tool_calls": calls})),
                Send(o_line(done=True, done_reason="stop", prompt_eval_count=9, eval_count=2)),
            )
        ),
        Reply(
            body=(
                Send(o_line(message={"role": "assistant", "content": "done"}, done=False)),
                Send(o_line(done=True, done_reason="stop", prompt_eval_count=20, eval_count=1)),
            )
        ),
    )
    command = make_tool(home, "echo", ECHO)
    daemon = await jpd_factory(
        model="ollama/qwen3",
        context_window=16384,
        config=tool_toml("echo", command, run='"unattended"')
        + ECHO_PARAMS
        + f'[providers.ollama]\nbase_url = "{fake.base_url}"\n',
    )
    await daemon.initialize()
    started, events = await daemon.run_turn("echo hi")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    [result] = results(daemon, started["turnId"])
    assert result["content"].strip() == "echo:hi"
    first, follow_up = (body(r) for r in fake.requests)
    assert [r.path for r in fake.requests] == ["/api/chat", "/api/chat"]
    assert first["options"]["num_ctx"] == 16384
    assert "echo" in [tool["function"]["name"] for tool in first["tools"]]
    tool_message = follow_up["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_name"] == "echo"
    assert tool_message["content"].strip() == "echo:hi"
    assert answers(home, started["conversationId"])[-1]["message"] == "done"


def r_event(kind: str, **fields: Any) -> bytes:
    return sse({"type": kind, **fields}, event=kind)


async def test_openai_responses_tool_call_carries_encrypted_reasoning(
    jpd_factory: StartJpd, home: Path, fake: FakeLLMServer
) -> None:
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Use echo."}],
        "encrypted_content": "gAAAA-ENCRYPTED",
    }
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "echo",
        "arguments": '{"text":"hi"}',
    }
    usage = {"input_tokens": 30, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5}
    done = r_event("response.completed", response={"status": "completed", "usage": usage})
    fake.push(
        stream_reply(
            r_event("response.reasoning_summary_text.delta", delta="Use echo."),
            r_event("response.output_item.done", item=reasoning),
            r_event("response.output_item.done", item=call),
            done,
        ),
        stream_reply(r_event("response.output_text.delta", delta="It said hi."), done),
    )
    command = make_tool(home, "echo", ECHO)
    daemon = await jpd_factory(
        model="openai/o-x",
        env={"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": f"{fake.base_url}/v1"},
        config='[assistant.reasoning]\neffort = "medium"\n'
        + tool_toml("echo", command, run='"unattended"')
        + ECHO_PARAMS,
    )
    await daemon.initialize()
    started, events = await daemon.run_turn("echo hi")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    [result] = results(daemon, started["turnId"])
    assert result["content"].strip() == "echo:hi"
    assert [r.path for r in fake.requests] == ["/v1/responses", "/v1/responses"]
    first, follow_up = (body(r) for r in fake.requests)
    assert first["include"] == ["reasoning.encrypted_content"] and first["store"] is False
    items = follow_up["input"]
    assert items[1] == reasoning
    assert items[2] == {
        "type": "function_call",
        "call_id": "call_1",
        "name": "echo",
        "arguments": '{"text":"hi"}',
    }
    assert items[3]["type"] == "function_call_output" and items[3]["call_id"] == "call_1"
    assert answers(home, started["conversationId"])[-1]["message"] == "It said hi."
    assert_no_secret(OPENAI_KEY, daemon, home)
