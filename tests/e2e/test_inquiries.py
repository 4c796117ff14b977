"""Inquiry routing and recording end to end (protocol.md 10, 12.2).

The conformance modules for these rules are tests/conformance/test_recording.py,
test_secrets.py and test_detached_policy.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from tests.e2e.conftest import StartJpd
from tests.e2e.harness import Jpd
from tests.e2e.test_tools import call, results
from tests.e2e.test_turns import disk_events
from tests.e2e.tools import make_tool, tool_toml

SECRET = "hunter2-sup3r-s3cret"


def asker(answer_type: str = '{"type": "boolean"}', **extra: Any) -> str:
    """A tool asking one question `q`, then printing the answer it got."""
    question = {"id": "q", "text": "Proceed?", **extra}
    return f"""
if "q" not in answers:
    q = json.loads({json.dumps(question)!r})
    q["answer_type"] = json.loads({answer_type!r})
    print(json.dumps({{"type": "needs_input", "question": q}}))
else:
    print("got=" + json.dumps(answers["q"]))
"""


def inquiry_pair(home: Path, conversation_id: str) -> tuple[dict, dict]:
    persisted = disk_events(home, conversation_id)
    request = next(e for e in persisted if e["type"] == "inquiry_request")
    response = next(e for e in persisted if e["type"] == "inquiry_response")
    assert request["id"] == response["id"]
    return request, response


async def start(
    jpd_factory: StartJpd,
    home: Path,
    *,
    body: str | None = None,
    settings: str = "",
    responses: list[dict[str, Any]] | None = None,
    capabilities: dict[str, Any] | None = None,
) -> Jpd:
    command = make_tool(home, "asker", body or asker())
    daemon = await jpd_factory(
        responses=responses or [call("asker"), {"text": "done"}],
        config=tool_toml("asker", command, run='"unattended"') + settings,
    )
    await daemon.initialize(capabilities=capabilities or {})
    return daemon


async def run(daemon: Jpd, **params: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    started, events = await daemon.run_turn("go", **params)
    assert events[-1]["event"]["stopReason"] == "end_turn"
    [result] = results(daemon, started["turnId"])
    return started, result


@pytest.mark.parametrize(
    ("detached", "settings", "extra", "reason", "message"),
    [
        ("deny", "", {}, "no_prompt_backend", "detached policy is `deny`"),
        ("defaults", "", {}, "no_prompt_backend", "has no default"),
        ("auto", "", {"exclusive": True}, "no_prompt_backend", "no interactive terminal"),
        ("deny", "", {"exclusive": True}, "no_prompt_backend", "no interactive terminal"),
        (
            None,
            'questions.q.target = "assistant"\n',
            {"exclusive": True},
            "assistant_routing_denied",
            "cannot be routed to the assistant",
        ),
        (
            None,
            'questions.q.answer = "maybe"\n',
            {},
            "invalid_static_answer",
            "conversation.tools.asker.questions.q.answer",
        ),
    ],
)
async def test_failed_routes_are_recorded_with_their_reason(
    jpd_factory: StartJpd,
    home: Path,
    detached: str | None,
    settings: str,
    extra: dict[str, Any],
    reason: str,
    message: str,
) -> None:
    """protocol.md 10.6: each failed route fails the call with its message and is recorded
    cancelled with its reason (12.2)."""
    daemon = await start(jpd_factory, home, body=asker(**extra), settings=settings)
    params = {"detached": detached} if detached else {}
    started, result = await run(daemon, **params)
    assert result["isError"] and message in result["content"]
    if reason in ("no_prompt_backend", "assistant_routing_denied"):
        assert "Do not retry" in result["content"]
    request, response = inquiry_pair(home, started["conversationId"])
    assert request["id"] == "call_1.q.1"
    assert response == {**response, "outcome": "cancelled", "reason": reason}


async def test_defaults_mode_uses_the_question_default(jpd_factory: StartJpd, home: Path) -> None:
    """protocol.md 10.2: under `defaults` the question's default is the answer."""
    daemon = await start(jpd_factory, home, body=asker(default=True))
    started, result = await run(daemon, detached="defaults")
    assert result["content"].strip() == "got=true"
    _, response = inquiry_pair(home, started["conversationId"])
    assert response["outcome"] == "answered" and response["answer"] is True


async def test_exclusive_question_with_static_answer_is_answered(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 10.1: a static answer applies first, even to an exclusive question."""
    daemon = await start(
        jpd_factory, home, body=asker(exclusive=True), settings="questions.q.answer = false\n"
    )
    _, result = await run(daemon, detached="deny")
    assert result["content"].strip() == "got=false"


async def test_config_can_soften_exclusive_and_route_to_assistant(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 10.1: config's `exclusive` overrides the tool's, so target assistant may
    answer."""
    answer = call("answer_inquiry", "inq", inquiry_id="call_1.q.1", answer="TRUE")
    daemon = await start(
        jpd_factory,
        home,
        body=asker(exclusive=True),
        settings='questions.q.target = "assistant"\nquestions.q.exclusive = false\n',
        responses=[call("asker"), answer, {"text": "done"}],
    )
    started, result = await run(daemon)
    assert result["content"].strip() == "got=true"
    request, response = inquiry_pair(home, started["conversationId"])
    assert request["question"]["exclusive"] is True  # as the tool declared it
    assert response["outcome"] == "answered" and response["answer"] is True


async def test_client_cancel_records_user_reason(jpd_factory: StartJpd, home: Path) -> None:
    """protocol.md 10.3: -32800 from a client cancels the question, recorded with reason
    `user`."""
    daemon = await start(jpd_factory, home, capabilities={"prompt": {"answerTypes": ["boolean"]}})

    async def cancel(params: dict[str, Any]) -> Any:
        raise JsonRpcException(code=-32800, message="user pressed Ctrl-C")

    daemon.on_prompt = cancel
    started, result = await run(daemon)
    assert result["isError"] and "cancelled" in result["content"]
    _, response = inquiry_pair(home, started["conversationId"])
    assert response["outcome"] == "cancelled" and response["reason"] == "user"


async def test_invalid_client_answer_is_sent_back_and_question_stays_open(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 10.3: an answer that does not fit is sent back with `previousError`; the
    question stays open."""
    daemon = await start(
        jpd_factory,
        home,
        body=asker('{"type": "select", "options": ["red", "blue"]}'),
        capabilities={"prompt": {"answerTypes": ["select"]}},
    )
    answers = iter([{"answer": "green"}, {"answer": "blue"}])

    async def answer(params: dict[str, Any]) -> Any:
        return next(answers)

    daemon.on_prompt = answer
    _, result = await run(daemon)
    assert result["content"].strip() == 'got="blue"'
    first, second = daemon.prompts
    assert "previousError" not in first
    assert "green" in second["previousError"] and "red" in second["previousError"]


async def test_client_only_gets_answer_types_it_declared(jpd_factory: StartJpd, home: Path) -> None:
    """protocol.md 10.3: a client is only sent questions whose type it declared."""
    daemon = await start(jpd_factory, home, capabilities={"prompt": {"answerTypes": ["text"]}})
    _, result = await run(daemon, detached="deny")
    assert result["isError"] and daemon.prompts == []


@pytest.mark.parametrize(
    ("answer_type", "wire", "answers", "expected"),
    [
        (
            {"type": "multi_select", "options": ["a", "b", "c"], "min_items": 1},
            {"type": "multi_select", "options": ["a", "b", "c"], "minItems": 1},
            [[], ["c", "a"]],
            ["c", "a"],
        ),
        (
            {"type": "number", "minimum": 1, "maximum": 10, "integer": True},
            {"type": "number", "minimum": 1, "maximum": 10, "integer": True},
            [2.5, 4.0],
            4,
        ),
    ],
)
async def test_number_and_multi_select_questions_reach_clients_that_declare_them(
    jpd_factory: StartJpd,
    home: Path,
    answer_type: dict[str, Any],
    wire: dict[str, Any],
    answers: list[Any],
    expected: Any,
) -> None:
    """protocol.md 10.1.1: number and multi_select questions reach clients that declare them."""
    kind = answer_type["type"]
    daemon = await start(
        jpd_factory,
        home,
        body=asker(json.dumps(answer_type)),
        capabilities={"prompt": {"answerTypes": ["boolean", kind]}},
    )
    replies = iter(answers)

    async def answer(params: dict[str, Any]) -> Any:
        return {"answer": next(replies)}

    daemon.on_prompt = answer
    started, result = await run(daemon)
    assert json.loads(result["content"].strip().removeprefix("got=")) == expected
    first, second = daemon.prompts
    assert first["question"]["answerType"] == wire
    assert "previousError" in second
    request, response = inquiry_pair(home, started["conversationId"])
    assert request["question"]["answer_type"] == answer_type
    assert response["answer"] == expected


async def test_a_client_without_the_new_types_is_not_asked_them(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 10.3: a client that did not declare a type is not asked questions of it."""
    daemon = await start(
        jpd_factory,
        home,
        body=asker('{"type": "number"}'),
        capabilities={"prompt": {"answerTypes": ["boolean", "select", "text", "secret"]}},
    )
    _, result = await run(daemon, detached="deny")
    assert result["isError"] and "detached policy is `deny`" in result["content"]
    assert daemon.prompts == []


async def test_remembered_answer_is_reused_within_turn_only_when_allowed(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 10.1: an answer remembered in one tool cycle answers the same question in a
    later one of the turn."""
    two_calls = {
        "tool_calls": [
            {"id": "c1", "name": "asker", "arguments": {}},
        ]
    }
    again = {"tool_calls": [{"id": "c2", "name": "asker", "arguments": {}}]}
    daemon = await start(
        jpd_factory,
        home,
        responses=[two_calls, again, {"text": "done"}],
        capabilities={"prompt": {"answerTypes": ["boolean"]}},
    )

    async def answer(params: dict[str, Any]) -> Any:
        return {"answer": True, "remember": True}

    daemon.on_prompt = answer
    started, _ = await daemon.run_turn("go")
    assert len(daemon.prompts) == 1
    persisted = disk_events(home, started["conversationId"])
    responses = [e for e in persisted if e["type"] == "inquiry_response"]
    assert [r["id"] for r in responses] == ["c1.q.1", "c2.q.1"]
    assert all(r["answer"] is True for r in responses)


async def test_persistence_none_is_never_remembered(jpd_factory: StartJpd, home: Path) -> None:
    """protocol.md 10.1: `persistence: "none"` is never remembered."""
    daemon = await start(
        jpd_factory,
        home,
        body=asker(persistence="none"),
        responses=[call("asker", "c1"), call("asker", "c2"), {"text": "done"}],
        capabilities={"prompt": {"answerTypes": ["boolean"]}},
    )

    async def answer(params: dict[str, Any]) -> Any:
        return {"answer": True, "remember": True}

    daemon.on_prompt = answer
    await daemon.run_turn("go")
    assert len(daemon.prompts) == 2


async def test_secret_answer_never_reaches_disk_logs_events_or_model(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 10.7: a secret answer reaches the tool only: never the disk, the daemon log,
    events or the model."""
    daemon = await start(
        jpd_factory,
        home,
        body=asker('{"type": "secret"}').replace(
            'print("got=" + json.dumps(answers["q"]))',
            'print("length=" + str(len(answers["q"])))',
        ),
        capabilities={"prompt": {"answerTypes": ["secret"]}},
    )

    async def answer(params: dict[str, Any]) -> Any:
        return {"answer": SECRET, "remember": True}

    daemon.on_prompt = answer
    started, result = await run(daemon)
    assert result["content"].strip() == f"length={len(SECRET)}"  # the tool got it
    _, response = inquiry_pair(home, started["conversationId"])
    assert response == {
        "timestamp": response["timestamp"],
        "type": "inquiry_response",
        "id": "call_1.q.1",
        "outcome": "redacted",
    }
    await daemon.stop()
    for path in home.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
    assert SECRET not in daemon.stderr.decode(errors="replace")
    assert SECRET not in json.dumps(daemon.events)


async def test_secret_is_never_sent_to_the_assistant(jpd_factory: StartJpd, home: Path) -> None:
    """protocol.md 10.7: a secret is never answered by a model (detached `auto` fails it)."""
    daemon = await start(jpd_factory, home, body=asker('{"type": "secret"}'))
    started, result = await run(daemon, detached="auto")
    assert result["isError"] and "no interactive terminal" in result["content"]
    _, response = inquiry_pair(home, started["conversationId"])
    assert response["reason"] == "no_prompt_backend"


async def test_deferred_question_answered_by_inquiry_answer(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 5.17: `inquiry/answer` from any client answers a deferred question."""
    daemon = await start(jpd_factory, home)
    started = await daemon.request("turn/start", {"message": "go"})
    pending = await _wait_pending(daemon)
    assert pending["inquiryId"] == "call_1.q.1" and pending["deferred"] is True
    assert pending["prompt"]["question"]["text"] == "Proceed?"
    listed = (await daemon.request("turn/list"))["inquiries"]
    assert [i["inquiryId"] for i in listed] == ["call_1.q.1"]
    with pytest.raises(JsonRpcException) as info:
        await daemon.request("inquiry/answer", {"inquiryId": "call_1.q.1", "answer": "yes"})
    assert info.value.code == -32602  # invalid: stays open
    assert await daemon.request("inquiry/answer", {"inquiryId": "call_1.q.1", "answer": True}) == {
        "accepted": True
    }
    await daemon.wait_event(started["turnId"], "turn_completed")
    assert results(daemon, started["turnId"])[0]["content"].strip() == "got=true"
    assert daemon.resolved[-1]["outcome"] == "answered"
    with pytest.raises(JsonRpcException) as info:
        await daemon.request("inquiry/answer", {"inquiryId": "call_1.q.1", "answer": True})
    assert info.value.code == -32001


async def test_deferred_question_reaches_a_client_that_declares_prompting_later(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 10.3: a deferred question is offered to a client that initializes later."""
    daemon = await start(jpd_factory, home)
    started = await daemon.request("turn/start", {"message": "go"})
    await _wait_pending(daemon)

    async def answer(params: dict[str, Any]) -> Any:
        return {"answer": False}

    daemon.on_prompt = answer
    await daemon.initialize(capabilities={"prompt": {"answerTypes": ["boolean"]}})
    await daemon.wait_event(started["turnId"], "turn_completed")
    assert results(daemon, started["turnId"])[0]["content"].strip() == "got=false"
    assert len(daemon.prompts) == 1


async def test_deferred_question_times_out_into_the_fallback(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 10.2: `defer` waits `detached_timeout`, then `detached_fallback` decides."""
    daemon = await start(
        jpd_factory, home, settings='detached_timeout = 0.5\ndetached_fallback = "deny"\n'
    )
    started, result = await run(daemon)
    assert result["isError"] and "`deny`" in result["content"]
    _, response = inquiry_pair(home, started["conversationId"])
    assert response["reason"] == "no_prompt_backend"
    assert daemon.resolved[-1]["outcome"] == "timed_out"


async def test_assistant_answers_through_answer_inquiry_on_the_parents_prefix(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 10.4: the side request is the turn's (tools, tool_choice, system,
    messages) plus the question, nothing pinned on a provider that does not constrain
    decoding; an invalid answer is fed back on the same prefix."""
    bad = call("answer_inquiry", "i1", inquiry_id="call_1.q.1", answer="yes")
    good = call("answer_inquiry", "i2", inquiry_id="call_1.q.1", answer="false")
    daemon = await start(
        jpd_factory,
        home,
        settings='questions.q.target = "assistant"\n',
        responses=[call("asker"), bad, good, {"text": "ok"}],
    )
    started, result = await run(daemon)
    assert result["content"].strip() == "got=false"
    requests = [json.loads(x) for x in (home / "requests.jsonl").read_text().splitlines()]
    parent, first, retry, follow = requests
    for side in (first, retry):
        assert side["system"] == parent["system"]
        # The parent's messages are a prefix of the side request's.
        assert side["messages"][: len(parent["messages"])] == parent["messages"]
        # The tools and tool_choice as they were; nothing pinned.
        assert side["tools"] == parent["tools"]
        assert side["tool_choice"] == parent["tool_choice"] == {"type": "auto"}
        assert side["pinned_arguments"] is None
    assert "yes" in retry["messages"][-1]["content"]  # the invalid answer was fed back
    tail = first["messages"][len(parent["messages"]) :]
    assert [m["role"] for m in tail] == ["assistant", "tool", "user"]
    assert "call_1.q.1" in tail[2]["content"] and "Proceed?" in tail[2]["content"]
    # The turn itself never sees the side request.
    assert [m["role"] for m in follow["messages"]] == ["user", "assistant", "tool"]
    types = [e["type"] for e in disk_events(home, started["conversationId"])]
    assert types.count("chat_response") == 1 and "inquiry_response" in types


async def test_assistant_that_never_answers_validly_is_backend_error(
    jpd_factory: StartJpd, home: Path
) -> None:
    bad = call("answer_inquiry", "i", inquiry_id="call_1.q.1", answer="perhaps")
    daemon = await start(
        jpd_factory,
        home,
        settings='questions.q.target = "assistant"\n',
        responses=[call("asker"), bad, bad, bad, {"text": "ok"}],
    )
    started, result = await run(daemon)
    assert result["isError"] and "perhaps" in result["content"]
    _, response = inquiry_pair(home, started["conversationId"])
    assert response["reason"] == "backend_error"


async def _wait_pending(daemon: Jpd) -> dict[str, Any]:
    for _ in range(400):
        pending = (await daemon.request("inquiry/list"))["inquiries"]
        if pending:
            result: dict[str, Any] = pending[0]
            return result
        await asyncio.sleep(0.05)
    raise AssertionError("no pending inquiry")


async def test_turn_cancelled_while_asking_dismisses_the_prompt_everywhere(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 10.3: a question open when the turn is cancelled is recorded `user`, clients
    are told, a late answer is ignored."""
    daemon = await start(jpd_factory, home, capabilities={"prompt": {"answerTypes": ["boolean"]}})
    asked, release = asyncio.Event(), asyncio.Event()

    finished = asyncio.Event()

    async def late(params: dict[str, Any]) -> Any:
        asked.set()
        try:
            await release.wait()
            return {"answer": True}
        finally:
            finished.set()

    daemon.on_prompt = late
    started = await daemon.request("turn/start", {"message": "go"})
    await asyncio.wait_for(asked.wait(), 60)
    await daemon.request("turn/cancel", {"turnId": started["turnId"]})
    done = await daemon.wait_event(started["turnId"], "turn_completed")
    assert done["event"]["stopReason"] == "cancelled"
    assert daemon.resolved[-1] == {
        "inquiryId": "call_1.q.1",
        "conversationId": started["conversationId"],
        "outcome": "cancelled",
    }
    _, response = inquiry_pair(home, started["conversationId"])
    assert response["outcome"] == "cancelled" and response["reason"] == "user"
    recorded = disk_events(home, started["conversationId"])
    release.set()  # a late answer is ignored and the daemon keeps serving
    await asyncio.wait_for(finished.wait(), 10)
    # A request after the late answer is served after it (one connection, in order).
    assert (await daemon.request("inquiry/list"))["inquiries"] == []
    assert [r["outcome"] for r in daemon.resolved] == ["cancelled"]
    assert disk_events(home, started["conversationId"]) == recorded
    assert daemon.process.returncode is None
