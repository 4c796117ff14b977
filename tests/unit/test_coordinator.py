"""The tool coordinator (`jpd.tools.coordinator`) with fakes: checks, permissions, the
`needs_input` loop through the router, results in call order (protocol.md section 9.3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from jpd.config.tools import ToolConfig
from jpd.conversation import events as ev
from jpd.core.turn_tools import make_coordinator
from jpd.llm.base import ToolCallPart
from jpd.protocol.question import Question, TextAnswer
from jpd.tools.builtin import BuiltinContext
from jpd.tools.catalog import EffectiveTool
from jpd.tools.coordinator import MAX_QUESTIONS, Coordinator
from jpd.tools.outcome import Failure, NeedsInput, Success, ToolOutcome
from jpd.tools.schema import parameters_to_schema
from tests.unit.fakes import Clients, FakeBackend, FakeLink, FakeLog, replies


class Asker:
    """A built-in that asks `questions` one by one, then reports the answers it got."""

    def __init__(self, name: str, questions: list[str], *, delay: float = 0.0) -> None:
        self.name = name
        self.questions = questions
        self.delay = delay
        self.runs: list[dict[str, Any]] = []

    def default_config(self) -> ToolConfig:
        return ToolConfig()

    def inquiry_source(self) -> ev.ToolSource | ev.AssistantSource:
        return ev.ToolSource(name=self.name)

    async def run(
        self, arguments: dict[str, Any], answers: dict[str, Any], ctx: BuiltinContext
    ) -> ToolOutcome:
        self.runs.append(dict(answers))
        await anyio.sleep(self.delay)
        if arguments.get("fail"):
            return Failure(message="it broke", trace=["line 1", "line 2"])
        for qid in self.questions:
            if qid not in answers:
                return NeedsInput(
                    question=Question(id=qid, text=f"{qid}?", answer_type=TextAnswer())
                )
        return Success(content=f"{self.name}: " + ",".join(f"{k}={v}" for k, v in answers.items()))


def effective(builtin: Asker, **config: Any) -> EffectiveTool:
    fields = {"run": "unattended", "parameters": {"fail": {"type": "boolean"}}, **config}
    merged = ToolConfig.model_validate(fields)
    return EffectiveTool(
        name=builtin.name,
        source="builtin",
        config=merged,
        enabled=merged.enabled,
        schema=parameters_to_schema(merged.parameters),
        builtin=builtin,  # type: ignore[arg-type]
    )


def coordinator(
    *tools: EffectiveTool, links: tuple[FakeLink, ...] = (), detached: Any = "deny"
) -> tuple[Coordinator, FakeLog]:
    log = FakeLog()
    built = make_coordinator(
        tools={t.name: t for t in tools},
        pending=Clients(list(links)).pending(),
        log=log,
        backend=FakeBackend("model says"),
        conversation_id="c",
        turn_id="t",
        root=Path("/"),
        env={},
        detached=detached,
    )
    return built, log


def call(name: str, call_id: str = "call_1", **arguments: Any) -> ToolCallPart:
    return ToolCallPart(id=call_id, name=name, arguments=arguments)


async def test_unknown_disabled_and_invalid_calls_fail_without_running() -> None:
    asker = Asker("a", [])
    off = Asker("off", [])
    coord, _ = coordinator(
        effective(asker, parameters={"n": {"type": "integer", "required": True}}),
        effective(off, enable=False),
    )

    ghost = await coord.run_one(call("ghost"))
    disabled = await coord.run_one(call("off"))
    invalid = await coord.run_one(call("a", n="three"))

    assert ghost == ("Tool 'ghost' does not exist. Available tools: a.", True)
    assert disabled == ("Tool 'off' is disabled in this turn. Available tools: a.", True)
    assert invalid[1] and "Invalid arguments for a" in invalid[0] and "n" in invalid[0]
    assert asker.runs == [] and off.runs == []


async def test_questions_loop_through_the_router_and_answers_accumulate() -> None:
    asker = Asker("a", ["first", "second"])
    link = FakeLink(1, answer=replies({"answer": "one"}, {"answer": "two"}))
    coord, log = coordinator(effective(asker), links=(link,))

    assert await coord.run_one(call("a")) == ("a: first=one,second=two", False)
    assert asker.runs == [{}, {"first": "one"}, {"first": "one", "second": "two"}]
    requests = [e.id for e in log.events if isinstance(e, ev.InquiryRequest)]
    assert requests == ["call_1.first.1", "call_1.second.1"]


async def test_question_config_and_detached_override_reach_the_router() -> None:
    asker = Asker("a", ["q"])
    coord, _ = coordinator(
        effective(asker, questions={"q": {"answer": "fixed"}}, detached="auto"), detached=None
    )
    assert await coord.run_one(call("a")) == ("a: q=fixed", False)

    asker2 = Asker("b", ["q"])
    coord2, _ = coordinator(effective(asker2, detached="deny"), detached="auto")
    assert await coord2.run_one(call("b")) == ("b: q=model says", False)


async def test_a_failed_question_fails_the_call() -> None:
    coord, _ = coordinator(effective(Asker("a", ["q"])))

    content, is_error = await coord.run_one(call("a"))

    assert is_error and "detached policy is `deny`" in content


async def test_failure_message_and_trace_reach_the_model() -> None:
    coord, _ = coordinator(effective(Asker("a", [])))

    assert await coord.run_one(call("a", fail=True)) == ("it broke\nline 1\nline 2", True)


async def test_a_tool_that_keeps_asking_is_stopped() -> None:
    asker = Asker("a", [f"q{i}" for i in range(MAX_QUESTIONS + 5)])
    coord, _ = coordinator(effective(asker), detached="auto")

    content, is_error = await coord.run_one(call("a"))

    assert is_error and f"kept asking questions ({MAX_QUESTIONS})" in content
    assert len(asker.runs) == MAX_QUESTIONS + 1


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"run": "skip"}, "was skipped by configuration (run = skip)"),
        ({"run": "ask"}, "This tool call (a) was denied by the detached policy 'deny'"),
        ({"result": "skip"}, "its result is not shared (result = skip)"),
        ({"result": "ask"}, "The result of a was withheld by the detached policy 'deny'"),
    ],
)
async def test_run_and_result_settings(config: dict[str, Any], expected: str) -> None:
    asker = Asker("a", [])
    coord, _ = coordinator(effective(asker, **config), detached="deny")

    content, _ = await coord.run_one(call("a"))

    assert expected in content
    assert len(asker.runs) == (0 if config.get("run") in ("skip", "ask") else 1)


async def test_permissions_are_asked_of_clients_before_run_and_before_delivery() -> None:
    asker = Asker("a", [])
    link = FakeLink(1, answer=replies({"allow": True}, {"allow": True}))
    coord, _ = coordinator(effective(asker, run="ask", result="ask"), links=(link,))

    assert await coord.run_one(call("a")) == ("a: ", False)
    assert [p["kind"] for _, p in link.requests] == ["run", "deliver"]
    assert link.requests[1][1]["content"] == "a: "


async def test_calls_run_in_parallel_and_results_keep_call_order() -> None:
    slow, fast = Asker("slow", [], delay=0.05), Asker("fast", [])
    coord, _ = coordinator(effective(slow), effective(fast))

    with anyio.fail_after(5):
        results = await coord.run([call("slow", "c1"), call("fast", "c2")])

    assert [(r.id, r.content) for r in results] == [("c1", "slow: "), ("c2", "fast: ")]
