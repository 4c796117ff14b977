"""The interface between the turn loop and tool execution.

The turn loop hands the tool calls of one model response to a `ToolRunner` (the tool
coordinator) and gets one result per call, each as soon as that call ends
(`on_result`), then all of them in call order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from jpd.conversation.events import ToolImage
from jpd.llm.base import ToolCallPart, ToolDefinition


@dataclass(frozen=True)
class ToolResultData:
    """What goes back to the model for one tool call."""

    id: str
    content: str
    is_error: bool
    images: tuple[ToolImage, ...] = ()


ResultCallback = Callable[[ToolResultData], None]
"""Called with each call's result as soon as that call ends."""


class CallRunner(Protocol):
    """Runs tool calls (the tool coordinator)."""

    async def run(
        self, calls: Sequence[ToolCallPart], on_result: ResultCallback | None = None
    ) -> list[ToolResultData]:
        """Run `calls`, passing each result to `on_result` when its call ends; returns
        the results in the order of `calls`."""
        ...


class ToolRunner(CallRunner, Protocol):
    """The tools of a turn: what the model is offered, and the runner of its calls."""

    def definitions(self) -> tuple[ToolDefinition, ...]:
        """The tools offered to the model."""
        ...

    def hidden(self, name: str) -> bool:
        """Whether clients need not show calls of this tool (`style.hidden`)."""
        ...
