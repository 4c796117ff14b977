"""The `ask_user` built-in end to end (protocol.md 9.5): the human is asked, or nobody is.

The conformance module for these rules is tests/conformance/test_ask_user.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jpd.inquiry import messages
from jpd.tools.builtin.ask_user import DESCRIPTION
from tests.e2e.conftest import StartJpd
from tests.e2e.harness import Jpd
from tests.e2e.test_inquiries import _wait_pending, inquiry_pair
from tests.e2e.test_tools import call, results
from tests.e2e.test_turns import disk_events

PROMPTING = {"prompt": {"answerTypes": ["boolean", "select", "text"]}}
ASK = {"question": "Deploy to production now?", "answer_type": "boolean"}


async def start(
    jpd_factory: StartJpd,
    *,
    responses: list[dict[str, Any]] | None = None,
    settings: str = "",
    capabilities: dict[str, Any] | None = None,
) -> Jpd:
    """A daemon whose model calls `ask_user` once (ASK), then says 'done'."""
    config = f"[conversation.tools.ask_user]\n{settings}" if settings else ""
    daemon = await jpd_factory(
        responses=responses or [call("ask_user", **ASK), {"text": "done"}], config=config
    )
    await daemon.initialize(capabilities=capabilities or {})
    return daemon


async def run(daemon: Jpd, **params: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    started, events = await daemon.run_turn("go", **params)
    assert events[-1]["event"]["stopReason"] == "end_turn"
    [result] = results(daemon, started["turnId"])
    return started, result


def requests(home: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (home / "requests.jsonl").read_text().splitlines()]


async def answer_with(daemon: Jpd, *answers: dict[str, Any]) -> None:
    pending = iter(answers)

    async def answer(params: dict[str, Any]) -> Any:
        return next(pending)

    daemon.on_prompt = answer


# --- the round trip ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "answer", "wire_type"),
    [
        ({"answer_type": "boolean", "default": False}, True, {"type": "boolean"}),
        (
            {"answer_type": "select", "options": ["backup", "overwrite", "abort"]},
            "backup",
            {"type": "select", "options": ["backup", "overwrite", "abort"]},
        ),
        ({}, "/tmp/output", {"type": "text"}),
    ],
)
async def test_round_trip_with_a_prompting_client(
    jpd_factory: StartJpd,
    home: Path,
    arguments: dict[str, Any],
    answer: Any,
    wire_type: dict[str, Any],
) -> None:
    """protocol.md 9.5: `ask_user` asks a capable client one exclusive question `answer` (label
    `Assistant`, source assistant) and returns the typed answer as JSON; both events are
    recorded (12.2)."""
    question = "How should I apply the change?"
    context = "The change modifies production config in place.\nIt cannot be undone."
    daemon = await start(
        jpd_factory,
        responses=[
            call("ask_user", question=question, context=context, **arguments),
            {"text": "Carrying on."},
        ],
        capabilities=PROMPTING,
    )
    await answer_with(daemon, {"answer": answer})
    started, result = await run(daemon)

    [prompt] = daemon.prompts
    assert prompt["inquiryId"] == "call_1.answer.1"
    assert prompt["toolName"] == "ask_user"
    assert prompt["promptLabel"] == "Assistant"
    assert prompt["source"] == {"type": "assistant"}
    assert prompt["question"] == {
        **prompt["question"],
        "id": "answer",
        "text": question,
        "context": context,
        "answerType": wire_type,
        "exclusive": True,
        "persistence": "none",
    }
    assert prompt["question"].get("default") == arguments.get("default")

    body = {"answer_type": wire_type["type"], "answer": answer}
    assert not result["isError"] and json.loads(result["content"]) == body
    # `style.hidden`: clients show the prompt, not the tool call and its result.
    shown = [e["event"] for e in daemon.turn_events(started["turnId"])]
    assert all(e["hidden"] for e in shown if e["kind"] in ("tool_call", "tool_result"))
    # The model reads the typed body and the turn goes on.
    assert requests(home)[1]["messages"][-1]["content"] == result["content"]

    request, response = inquiry_pair(home, started["conversationId"])
    assert request["id"] == "call_1.answer.1"
    assert request["source"] == {"type": "assistant"}
    assert request["question"] == {
        **request["question"],
        "id": "answer",
        "text": question,
        "context": context,
        "answer_type": wire_type,
        "exclusive": True,
        "persistence": "none",
    }
    assert response == {**response, "outcome": "answered", "answer": answer}
    types = [e["type"] for e in disk_events(home, started["conversationId"])]
    assert types.index("tool_call_request") < types.index("inquiry_request")
    assert types.index("inquiry_response") < types.index("tool_call_response")


async def test_the_model_is_told_the_long_description_and_schema(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 9.5: the model is offered `ask_user` with its description and schema."""
    daemon = await start(jpd_factory, responses=[{"text": "hi"}])
    await run_text(daemon)
    [tool] = [t for t in requests(home)[0]["tools"] if t["name"] == "ask_user"]
    assert tool["description"] == DESCRIPTION
    assert tool["parameters"]["required"] == ["question"]
    assert tool["parameters"]["properties"]["default"]["type"] == ["boolean", "string"]


async def test_bad_arguments_reach_the_model_and_nobody_is_asked(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 9.5: bad arguments fail the call before any question is asked or recorded."""
    daemon = await start(
        jpd_factory,
        responses=[call("ask_user", question="Pick one?", answer_type="select"), {"text": "ok"}],
        capabilities=PROMPTING,
    )
    started, result = await run(daemon)
    assert result["isError"] and "`options` is required" in result["content"]
    assert daemon.prompts == []
    types = [e["type"] for e in disk_events(home, started["conversationId"])]
    assert "inquiry_request" not in types


async def test_a_client_may_not_remember_the_answer(jpd_factory: StartJpd, home: Path) -> None:
    """protocol.md 10.1: `persistence: "none"` (ask_user's) is never remembered, even with
    `remember: true`."""
    daemon = await start(
        jpd_factory,
        responses=[call("ask_user", "c1", **ASK), call("ask_user", "c2", **ASK), {"text": "ok"}],
        capabilities=PROMPTING,
    )
    await answer_with(daemon, {"answer": True, "remember": True}, {"answer": False})
    started, _ = await daemon.run_turn("go")
    assert len(daemon.prompts) == 2
    got = [json.loads(r["content"])["answer"] for r in results(daemon, started["turnId"])]
    assert got == [True, False]
    responses = [
        e for e in disk_events(home, started["conversationId"]) if e["type"] == "inquiry_response"
    ]
    assert [(r["id"], r["answer"]) for r in responses] == [
        ("c1.answer.1", True),
        ("c2.answer.1", False),
    ]


async def test_users_may_relabel_but_not_change_the_source(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 12.2: config may relabel the prompt; the source comes from the tool, never
    from config."""
    daemon = await start(
        jpd_factory, settings='questions.answer.prompt_label = "Claude"\n', capabilities=PROMPTING
    )
    await answer_with(daemon, {"answer": False})
    started, result = await run(daemon)
    [prompt] = daemon.prompts
    assert prompt["promptLabel"] == "Claude"
    assert prompt["source"] == {"type": "assistant"}
    assert json.loads(result["content"]) == {"answer_type": "boolean", "answer": False}
    request, _ = inquiry_pair(home, started["conversationId"])
    assert request["source"] == {"type": "assistant"}


# --- routing without a human (RFD 083's table) -----------------------------------------


async def test_static_answer_is_honoured_without_asking(jpd_factory: StartJpd, home: Path) -> None:
    """protocol.md 10.1: a static `answer` answers `ask_user` without asking anybody."""
    daemon = await start(
        jpd_factory, settings="questions.answer.answer = true\n", capabilities=PROMPTING
    )
    started, result = await run(daemon, detached="deny")
    assert json.loads(result["content"]) == {"answer_type": "boolean", "answer": True}
    assert daemon.prompts == []
    request, response = inquiry_pair(home, started["conversationId"])
    assert request["source"] == {"type": "assistant"}
    assert response == {**response, "outcome": "answered", "answer": True}


async def test_invalid_static_answer_blames_the_config(jpd_factory: StartJpd, home: Path) -> None:
    """protocol.md 10.6: an invalid static answer fails naming the config key
    (`invalid_static_answer`)."""
    daemon = await start(jpd_factory, settings='questions.answer.answer = "maybe"\n')
    started, result = await run(daemon)
    assert result["isError"]
    assert "conversation.tools.ask_user.questions.answer.answer" in result["content"]
    assert "do not retry" in result["content"]
    _, response = inquiry_pair(home, started["conversationId"])
    assert response == {**response, "outcome": "cancelled", "reason": "invalid_static_answer"}


@pytest.mark.parametrize("detached", ["deny", "auto"])
@pytest.mark.parametrize("capabilities", [{}, {"prompt": {"answerTypes": ["select"]}}])
async def test_nobody_to_ask_fails_and_the_model_never_answers(
    jpd_factory: StartJpd, home: Path, detached: str, capabilities: dict[str, Any]
) -> None:
    """protocol.md 10.2: a human-only question nobody can answer fails (`no_prompt_backend`)
    under every mode; the model is never asked."""
    daemon = await start(jpd_factory, capabilities=capabilities)
    started, result = await run(daemon, detached=detached)
    assert result == {**result, "isError": True, "content": messages.no_prompt_backend("ask_user")}
    assert daemon.prompts == []
    assert len(requests(home)) == 2  # no inquiry side request: the model is never asked
    request, response = inquiry_pair(home, started["conversationId"])
    assert request["source"] == {"type": "assistant"}
    assert response == {**response, "outcome": "cancelled", "reason": "no_prompt_backend"}


async def test_detached_policy_from_config_applies_too(jpd_factory: StartJpd, home: Path) -> None:
    """protocol.md 10.2: the detached policy from config applies to `ask_user` too."""
    daemon = await start(jpd_factory, settings='detached = "auto"\n')
    _, result = await run(daemon)
    assert result["content"] == messages.no_prompt_backend("ask_user")
    assert len(requests(home)) == 2


async def test_defaults_mode_without_default_fails(jpd_factory: StartJpd, home: Path) -> None:
    """protocol.md 10.2: under `defaults` a human-only question fails (`no_prompt_backend`)."""
    daemon = await start(jpd_factory)
    started, result = await run(daemon, detached="defaults")
    assert result["isError"] and "Do not retry" in result["content"]
    assert len(requests(home)) == 2
    _, response = inquiry_pair(home, started["conversationId"])
    assert response == {**response, "outcome": "cancelled", "reason": "no_prompt_backend"}


async def test_defaults_mode_never_takes_the_models_own_default(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 10.2: under `defaults` the model's own default is never the human's answer."""
    daemon = await start(
        jpd_factory, responses=[call("ask_user", **ASK, default=True), {"text": "ok"}]
    )
    _, result = await run(daemon, detached="defaults")
    assert result == {**result, "isError": True, "content": messages.no_prompt_backend("ask_user")}


@pytest.mark.parametrize("detached", [None, "auto"])
async def test_assistant_target_is_refused(
    jpd_factory: StartJpd, home: Path, detached: str | None
) -> None:
    """protocol.md 10.1: target assistant for a human-only question fails
    (`assistant_routing_denied`)."""
    daemon = await start(jpd_factory, settings='questions.answer.target = "assistant"\n')
    started, result = await run(daemon, **({"detached": detached} if detached else {}))
    assert result == {
        **result,
        "isError": True,
        "content": messages.assistant_routing_denied("ask_user"),
    }
    assert len(requests(home)) == 2
    _, response = inquiry_pair(home, started["conversationId"])
    assert response == {**response, "outcome": "cancelled", "reason": "assistant_routing_denied"}


async def test_deferred_question_reaches_a_client_that_declares_prompting_later(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 10.3: a deferred question is offered to a client that initializes later with
    the capability."""
    daemon = await start(jpd_factory)
    started = await daemon.request("turn/start", {"message": "go"})
    pending = await _wait_pending(daemon)
    assert pending["inquiryId"] == "call_1.answer.1" and pending["deferred"] is True
    assert pending["prompt"]["promptLabel"] == "Assistant"
    assert pending["prompt"]["source"] == {"type": "assistant"}

    await answer_with(daemon, {"answer": True})
    await daemon.initialize(capabilities=PROMPTING)
    await daemon.wait_event(started["turnId"], "turn_completed")
    [result] = results(daemon, started["turnId"])
    assert json.loads(result["content"]) == {"answer_type": "boolean", "answer": True}
    assert len(daemon.prompts) == 1
    _, response = inquiry_pair(home, started["conversationId"])
    assert response == {**response, "outcome": "answered", "answer": True}


# --- toggles (RFD 081) ---------------------------------------------------------------


async def test_bulk_disable_keeps_it_and_naming_it_removes_it(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 9.5: only a named toggle turns `ask_user` off."""
    daemon = await start(jpd_factory, responses=[{"text": "a"}, {"text": "b"}])
    await run_text(daemon, tools=[{"enable": False}])
    await run_text(daemon, tools=[{"enable": False}, {"enable": False, "name": "ask_user"}])
    first, second = requests(home)
    assert [t["name"] for t in first["tools"]] == ["ask_user", "answer_inquiry"]
    assert second["tools"] == []


async def run_text(daemon: Jpd, **params: Any) -> None:
    _, events = await daemon.run_turn("hi", **params)
    assert events[-1]["event"]["stopReason"] == "end_turn"
