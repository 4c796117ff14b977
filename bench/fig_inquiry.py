"""Model requests per LLM inquiry when the parent request forced another tool
(protocol.md 10.4), the old rule (keep the parent's `tool_choice`) beside the new one
(force `answer_inquiry` at once), in one run, in process.

The provider honours `tool_choice` as a hosted API does (a forced tool is called), so
under the old rule the first side request is spent on a call to the forced tool.
"""

from __future__ import annotations

from unittest import mock

import anyio

from bench.report import Row
from jpd.inquiry import backend
from jpd.llm.base import ToolChoice, ToolChoiceAuto, ToolChoiceTool
from tests.fixtures.choice_provider import ChoiceProvider, ask_assistant, parent_request


async def _requests(choice: ToolChoice, inquiries: int) -> float:
    total = 0
    for _ in range(inquiries):
        provider = ChoiceProvider()
        answer = await ask_assistant(provider, parent_request(choice))
        assert answer is True
        total += len(provider.requests)
    return total / inquiries


def _old_rule(choice: ToolChoice) -> bool:
    return True  # the parent's tool_choice was always kept


def inquiry_requests(inquiries: int = 20) -> list[Row]:
    """Requests per inquiry, old rule vs new, for a forced parent and for `auto`."""
    rows = []
    for label, choice in (
        ("parent forces another tool", ToolChoiceTool(name="echo")),
        ("parent auto", ToolChoiceAuto()),
    ):
        new = anyio.run(_requests, choice, inquiries)
        with mock.patch.object(backend, "keeps_parent_choice", _old_rule):
            old = anyio.run(_requests, choice, inquiries)
        rows.append(
            Row(
                figure=f"model requests per inquiry, {label}",
                measured=f"{new:.2f} (new rule)",
                reference=f"{old:.2f} (old rule: parent tool_choice kept)",
                ratio=new / old,
                goal="1 request: none wasted on the forced tool",
            )
        )
    return rows


if __name__ == "__main__":
    from bench.report import print_table

    print_table(inquiry_requests())
