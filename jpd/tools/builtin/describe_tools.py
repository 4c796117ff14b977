"""`describe_tools`: full descriptions of named tools (the model sees only summaries)."""

from __future__ import annotations

from typing import Any

from jpd.config.tools import ParameterConfig, ToolConfig
from jpd.conversation import events as ev
from jpd.tools.builtin import BuiltinContext
from jpd.tools.outcome import Failure, Success, ToolOutcome


class DescribeTools:
    """Returns the long description of each named tool."""

    name = "describe_tools"

    def default_config(self) -> ToolConfig:
        return ToolConfig.model_validate(
            {
                "source": "builtin",
                "summary": "Get the full description of one or more tools by name.",
                "run": "unattended",
                "parameters": {
                    "tools": ParameterConfig.model_validate(
                        {
                            "type": "array",
                            "required": True,
                            "items": {"type": "string"},
                            "description": "Names of the tools to describe.",
                        }
                    )
                },
            }
        )

    def inquiry_source(self) -> ev.ToolSource | ev.AssistantSource:
        return ev.ToolSource(name=self.name)

    async def run(
        self, arguments: dict[str, Any], answers: dict[str, Any], ctx: BuiltinContext
    ) -> ToolOutcome:
        names = arguments.get("tools") or []
        unknown = [n for n in names if n not in ctx.tool_docs]
        if unknown:
            known = ", ".join(sorted(ctx.tool_docs)) or "none"
            return Failure(message=f"unknown tools: {', '.join(unknown)}; available: {known}")
        parts = []
        for name in names:
            summary, description = ctx.tool_docs[name]
            parts.append(f"## {name}\n\n{description or summary or '(no description)'}")
        return Success(content="\n\n".join(parts))
