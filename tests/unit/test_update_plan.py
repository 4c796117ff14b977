"""The `update_plan` built-in: registered, unattended, validates the whole plan."""

from __future__ import annotations

from jpd.tools.builtin import BuiltinContext, default_registry
from jpd.tools.builtin.update_plan import UpdatePlan
from jpd.tools.outcome import Failure, Success

CTX = BuiltinContext(conversation_id="c", tool_docs={})


def test_registered_and_runs_unattended() -> None:
    tool = default_registry().get("update_plan")
    assert isinstance(tool, UpdatePlan)
    config = tool.default_config()
    assert config.run == "unattended" and config.parameters["plan"].required


async def test_a_valid_plan_is_acknowledged() -> None:
    plan = [
        {"step": "read the code", "status": "completed"},
        {"step": "fix the bug", "status": "in_progress"},
        {"step": "test", "status": "pending"},
    ]
    outcome = await UpdatePlan().run({"plan": plan}, {}, CTX)
    assert outcome == Success(content="Plan updated: 1 of 3 steps completed.")


async def test_bad_plans_are_tool_errors_naming_the_problem() -> None:
    tool = UpdatePlan()
    cases = {
        "non-empty array": {"plan": []},
        "plan[0].status must be one of pending, in_progress, completed": {
            "plan": [{"step": "x", "status": "done"}]
        },
        "plan[0].step must be a non-empty string": {"plan": [{"step": " ", "status": "pending"}]},
        "at most one step may be in_progress": {
            "plan": [{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}]
        },
    }
    for problem, arguments in cases.items():
        outcome = await tool.run(arguments, {}, CTX)
        assert isinstance(outcome, Failure) and problem in outcome.message, problem
    outcome = await tool.run({"plan": ["not an object"]}, {}, CTX)
    assert isinstance(outcome, Failure)
