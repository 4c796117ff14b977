"""The model's plan (the `update_plan` tool's calls) as ACP `plan` updates.

A successful `update_plan` call's `plan` argument becomes the session's plan (Zed's plan
panel); every call sends the whole plan, so each replaces the last. A failed call
(an invalid plan, refused by the tool) changes nothing.
"""

from __future__ import annotations

from typing import Any

from acp.schema import AgentPlanUpdate, PlanEntry

PLAN_TOOL = "update_plan"
_STATUSES = ("pending", "in_progress", "completed")


def plan_update(arguments: Any) -> AgentPlanUpdate | None:
    """The `plan` update for an `update_plan` call's arguments (None if malformed)."""
    plan = arguments.get("plan") if isinstance(arguments, dict) else None
    if not isinstance(plan, list):
        return None
    entries = []
    for item in plan:
        if not isinstance(item, dict) or item.get("status") not in _STATUSES:
            return None
        entries.append(
            PlanEntry(content=str(item.get("step", "")), priority="medium", status=item["status"])
        )
    return AgentPlanUpdate(session_update="plan", entries=entries)


class PlanCalls:
    """Remembers `update_plan` calls until their result says whether they took."""

    def __init__(self) -> None:
        self._arguments: dict[str, Any] = {}

    def started(self, call_id: str, name: str, arguments: Any) -> None:
        if name == PLAN_TOOL:
            self._arguments[call_id] = arguments

    def ended(self, call_id: str, is_error: bool) -> list[AgentPlanUpdate]:
        arguments = self._arguments.pop(call_id, None)
        if arguments is None or is_error:
            return []
        update = plan_update(arguments)
        return [update] if update is not None else []
