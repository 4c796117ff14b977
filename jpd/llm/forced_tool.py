"""A forced tool choice with reasoning on, and its one retry without reasoning
(protocol.md 9.2), for any provider whose API refuses the two together.

Such a provider declares `refuses_forced_tool_with_reasoning` and, when a request
forces a tool (`any` or a name) with reasoning on, sends it `soften`ed: `tool_choice:
auto` plus a system directive to call the tool. Whoever sends the request (the turn
loop, the inquiry backend) checks the answer with `missed`: an answer that ended
without the demanded call is kept in the history (its reasoning and text), followed
by `retry_note` as a user message, and the request is sent once more with reasoning
off for that one request (`without_reasoning`), so the real `tool_choice` goes to the
API. There is never a second retry: if that answer skips the tool too, it stands.
"""

from __future__ import annotations

from collections.abc import Iterable

from jpd.llm.base import FinishReason, ModelRequest, Provider, ToolChoiceAuto, ToolChoiceTool


def forces_tool(request: ModelRequest) -> bool:
    """Whether `request` forces a tool call (`any` or a named tool)."""
    return request.tool_choice.type in ("any", "tool")


def soft_forced(provider: Provider, request: ModelRequest) -> bool:
    """Whether `provider` sends `request` softened (a forced tool with reasoning on)."""
    return (
        provider.refuses_forced_tool_with_reasoning
        and forces_tool(request)
        and request.reasoning_effort != "off"
    )


def forced_name(request: ModelRequest) -> str | None:
    """The tool `request` forces by name (None for `any` or no forcing)."""
    choice = request.tool_choice
    return choice.name if isinstance(choice, ToolChoiceTool) else None


def directive(request: ModelRequest) -> str:
    """The system-prompt instruction that stands in for the forced tool choice."""
    name = forced_name(request)
    if name is not None:
        return f"IMPORTANT: You MUST call the `{name}` tool in your response."
    return "IMPORTANT: You MUST call one of the available tools in your response."


def soften(request: ModelRequest) -> ModelRequest:
    """`request` with `tool_choice: auto` and the directive appended to the system prompt."""
    text = directive(request)
    system = f"{request.system}\n\n{text}" if request.system else text
    return request.model_copy(update={"tool_choice": ToolChoiceAuto(), "system": system})


def without_reasoning(request: ModelRequest) -> ModelRequest:
    """`request` with reasoning disabled (the original tool choice is kept)."""
    return request.model_copy(update={"reasoning_effort": "off", "reasoning_budget": None})


def missed(request: ModelRequest, finish: FinishReason, called: Iterable[str]) -> bool:
    """Whether an answer to forced `request` completed (`end_turn`) without the call it
    demanded; `called` names the tools it called."""
    if finish != "end_turn" or not forces_tool(request):
        return False
    name = forced_name(request)
    names = list(called)
    return name not in names if name is not None else not names


def retry_note(tool: str | None) -> str:
    """The user message before the retry: what the previous answer failed to do."""
    what = f"the `{tool}` tool" if tool else "one of the available tools"
    return f"Your previous answer did not call {what}. Call it now."
