"""`update_plan`: the model keeps a visible plan of its steps (as Codex's tool does).

Each call sends the whole plan, `{plan: [{step, status}]}` with status `pending`,
`in_progress` or `completed`; it runs unattended and is recorded like any call, so the
plan is the arguments of the conversation's last `update_plan` call. Clients show it
(ACP's `plan` update, a checklist in `jp`, the Neovim answer buffer).
"""

from __future__ import annotations

from typing import Any

from jpd.config.tools import ToolConfig
from jpd.conversation import events as ev
from jpd.tools.builtin import BuiltinContext
from jpd.tools.outcome import Failure, Success, ToolOutcome

STATUSES = ("pending", "in_progress", "completed")

DESCRIPTION = """\
Keep a short plan of the steps of a task that takes several steps, visible to the user.
Send the whole plan each time (it replaces the previous one), with each step's status:
pending, in_progress (at most one at a time) or completed. Update it as you finish
steps; skip it for simple one-step requests."""


class UpdatePlan:
    """Validates a plan and acknowledges it; the plan itself lives in the call."""

    name = "update_plan"

    def default_config(self) -> ToolConfig:
        return ToolConfig.model_validate(
            {
                "source": "builtin",
                "summary": "Record the plan of a multi-step task: steps and their status.",
                "description": DESCRIPTION,
                "run": "unattended",
                "parameters": {
                    "plan": {
                        "type": "array",
                        "required": True,
                        "description": "Every step of the plan, in order.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "step": {"type": "string", "required": True},
                                "status": {
                                    "type": "string",
                                    "required": True,
                                    "enum": list(STATUSES),
                                },
                            },
                        },
                    }
                },
            }
        )

    def inquiry_source(self) -> ev.ToolSource | ev.AssistantSource:
        return ev.ToolSource(name=self.name)

    async def run(
        self, arguments: dict[str, Any], answers: dict[str, Any], ctx: BuiltinContext
    ) -> ToolOutcome:
        plan = arguments.get("plan")
        if not isinstance(plan, list) or not plan:
            return Failure(message="plan must be a non-empty array of {step, status}")
        problems = []
        for index, item in enumerate(plan):
            step = item.get("step") if isinstance(item, dict) else None
            status = item.get("status") if isinstance(item, dict) else None
            if not isinstance(step, str) or not step.strip():
                problems.append(f"plan[{index}].step must be a non-empty string")
            if status not in STATUSES:
                problems.append(f"plan[{index}].status must be one of {', '.join(STATUSES)}")
        running = sum(
            1 for item in plan if isinstance(item, dict) and item.get("status") == "in_progress"
        )
        if running > 1:
            problems.append("at most one step may be in_progress")
        if problems:
            return Failure(message="; ".join(problems))
        done = sum(1 for item in plan if item["status"] == "completed")
        return Success(content=f"Plan updated: {done} of {len(plan)} steps completed.")
