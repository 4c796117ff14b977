"""Turns on the real embedded model (SmolLM2-135M through llama.cpp)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e.conftest import StartJpd
from tests.e2e.test_tools import results
from tests.e2e.test_turns import disk_events
from tests.e2e.tools import make_tool, tool_toml

LOCAL = "local/smollm2"
SHORT = "[assistant.model.parameters]\nmax_tokens = 48\n"


async def test_local_model_answers_with_text(jpd_factory: StartJpd, home: Path) -> None:
    daemon = await jpd_factory(model=LOCAL, config=SHORT)
    await daemon.initialize()
    started, events = await daemon.run_turn("What is the capital of France?")
    assert events[-1]["event"]["stopReason"] in ("end_turn", "max_tokens")
    text = "".join(e["event"]["text"] for e in events if e["event"]["kind"] == "text_delta")
    assert text.strip()
    persisted = disk_events(home, started["conversationId"])
    assert persisted[0]["model"] == LOCAL
    assert any(e["type"] == "chat_response" and e.get("message") for e in persisted)


async def test_local_model_forced_tool_call_runs_the_tool(
    jpd_factory: StartJpd, home: Path
) -> None:
    command = make_tool(
        home,
        "weather",
        'print(json.dumps({"type": "success", "content": "Sunny in " + args["city"]}))\n',
    )
    daemon = await jpd_factory(
        model=LOCAL,
        config='[assistant]\ntool_choice = "weather"\n'
        + SHORT
        + tool_toml("weather", command, run='"unattended"', summary='"Weather for a city."')
        + 'parameters.city = { type = "string", required = true, description = "City name" }\n',
    )
    await daemon.initialize()
    started, events = await daemon.run_turn("What is the weather in Paris?")
    assert events[-1]["event"]["stopReason"] in ("end_turn", "max_tokens")
    calls = [e["event"] for e in events if e["event"]["kind"] == "tool_call"]
    assert calls and calls[0]["name"] == "weather"
    assert isinstance(calls[0]["arguments"]["city"], str) and calls[0]["arguments"]["city"]
    [result] = results(daemon, started["turnId"])
    assert not result["isError"] and result["content"].startswith("Sunny in ")
    persisted = disk_events(home, started["conversationId"])
    types = [e["type"] for e in persisted]
    assert types.index("tool_call_request") < types.index("tool_call_response")


async def test_local_model_answers_a_tool_question_typed(jpd_factory: StartJpd, home: Path) -> None:
    body = """
if "go" not in answers:
    print(json.dumps({"type": "needs_input", "question": {"id": "go",
        "text": "Is 2 greater than 1? Answer true or false.", "answer_type": {"type": "boolean"}}}))
else:
    print("answer=" + json.dumps(answers["go"]))
"""
    command = make_tool(home, "check", body)
    daemon = await jpd_factory(
        model=LOCAL,
        config='[assistant]\ntool_choice = "check"\n'
        + SHORT
        + tool_toml("check", command, run='"unattended"', summary='"Check a fact."')
        + 'questions.go.target = "assistant"\n',
    )
    await daemon.initialize()
    started, _ = await daemon.run_turn("Run the check tool.")
    [result] = results(daemon, started["turnId"])
    content = result["content"].strip()
    assert content in ("answer=true", "answer=false"), content
    response = next(
        e for e in disk_events(home, started["conversationId"]) if e["type"] == "inquiry_response"
    )
    assert response["outcome"] == "answered" and isinstance(response["answer"], bool)
    assert json.loads(content.split("=", 1)[1]) is response["answer"]


# A 135M model fills every optional argument, so `ask_user` would (rightly) reject
# `options` beside a text answer. Narrowing the schema by config keeps the grammar
# from producing such combinations: a text question, `options`/`default` only null.
NARROW_ASK_USER = """[conversation.tools.ask_user.parameters]
answer_type = { type = "string", enum = ["text"] }
options = { type = "null" }
default = { type = "null" }
"""


async def test_local_model_forced_ask_user_gets_client_answer(
    jpd_factory: StartJpd, home: Path
) -> None:
    daemon = await jpd_factory(
        model=LOCAL,
        config='[assistant]\ntool_choice = "ask_user"\n'
        "[assistant.model.parameters]\nmax_tokens = 160\n" + NARROW_ASK_USER,
    )
    await daemon.initialize(capabilities={"prompt": {"answerTypes": ["text"]}})

    async def answer(params: dict[str, Any]) -> Any:
        return {"answer": "Lisbon"}

    daemon.on_prompt = answer
    started, events = await daemon.run_turn("Ask me which city I live in, then greet me.")
    assert events[-1]["event"]["stopReason"] in ("end_turn", "max_tokens")
    calls = [e["event"] for e in events if e["event"]["kind"] == "tool_call"]
    assert calls[0]["name"] == "ask_user"
    [prompt] = daemon.prompts
    assert prompt["promptLabel"] == "Assistant" and prompt["source"] == {"type": "assistant"}
    assert prompt["question"]["text"] == calls[0]["arguments"]["question"]
    assert prompt["question"]["exclusive"] is True
    [result] = results(daemon, started["turnId"])
    assert not result["isError"], result["content"]
    assert json.loads(result["content"]) == {"answer_type": "text", "answer": "Lisbon"}
    persisted = disk_events(home, started["conversationId"])
    request = next(e for e in persisted if e["type"] == "inquiry_request")
    response = next(e for e in persisted if e["type"] == "inquiry_response")
    assert request["source"] == {"type": "assistant"}
    assert response == {**response, "outcome": "answered", "answer": "Lisbon"}
    # The turn went on after the answer: the model was called again and the turn ended.
    types = [e["type"] for e in persisted]
    assert "chat_response" in types[types.index("tool_call_response") :]


async def test_local_model_holds_a_twelve_turn_conversation(
    jpd_factory: StartJpd, home: Path
) -> None:
    """Twelve long answers outgrow the embedded model's 2,048 tokens: the conversation
    compacts (protocol.md 12.5) instead of dying on the sixth question."""
    daemon = await jpd_factory(
        model=LOCAL, config="[assistant.model.parameters]\nmax_tokens = 200\n"
    )
    await daemon.initialize()
    conversation = None
    for n in range(12):
        params = {"conversationId": conversation} if conversation else {}
        started, events = await daemon.run_turn(
            f"Write a long, detailed story about a lighthouse keeper, part {n + 1}.", **params
        )
        conversation = started["conversationId"]
        end = events[-1]["event"]
        assert end["stopReason"] in ("end_turn", "max_tokens"), end.get("error")
        usage = [e["event"] for e in events if e["event"]["kind"] == "usage"]
        assert usage and usage[-1]["context"]["window"] == 2048
        assert usage[-1]["context"]["used"] <= 2048
    persisted = disk_events(home, conversation or "")
    compactions = [e for e in persisted if e["type"] == "context_compacted"]
    assert compactions and all(c["tokens_after"] < c["tokens_before"] for c in compactions)
    assert len([e for e in persisted if e["type"] == "chat_request"]) == 12  # nothing lost
    # No summary that restates the instructions stands in the context (protocol.md 12.5):
    # each one kept passed the measure then, and passes it against the whole conversation.
    from jpd.context.summary import SMALL_INSTRUCTION
    from jpd.context.summary_check import problem

    said = "\n".join(str(e.get("content") or e.get("message") or "") for e in persisted)
    for compaction in compactions:
        if compaction["method"] == "summary":
            assert problem(compaction["summary"], SMALL_INSTRUCTION, said) is None
