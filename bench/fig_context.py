"""Tokens sent per turn over a 200-turn conversation with large tool outputs, with and
without compaction (protocol.md 12.5): the real turn loop and context keeper in this
process, against a fake model that counts 4 characters a token and answers at once."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import anyio

from bench.report import Row

WINDOW = 32_000
OUTPUT = 6_000  # characters of each tool output


class _Model:
    name = "test"
    refuses_forced_tool_with_reasoning = False

    def __init__(self) -> None:
        self.sent: list[int] = []

    def stream(self, request: Any) -> Any:
        return self._stream(request)

    @asynccontextmanager
    async def _stream(self, request: Any) -> AsyncIterator[AsyncIterator[Any]]:
        from jpd.llm import base as llm
        from jpd.protocol.usage import TokenUsage

        size = len(json.dumps([m.model_dump() for m in request.messages])) // 4
        self.sent.append(size)

        async def events() -> AsyncIterator[Any]:
            last = request.messages[-1]
            yield llm.UsageEvent(usage=TokenUsage(input_tokens=size, output_tokens=10))
            if isinstance(last, llm.UserMessage) and last.content.startswith("Stop here"):
                yield llm.TextDelta(text="Goal: the bench. Constraints: none. Next: more.")
            elif isinstance(last, llm.UserMessage):
                n = len(self.sent)
                yield llm.ToolCallEvent(id=f"c{n}", name="read", arguments={"path": f"f{n}"})
                yield llm.Finish(reason="tool_use")
                return
            else:
                yield llm.TextDelta(text="Read it; here is what it says.")
            yield llm.Finish(reason="end_turn")

        yield events()

    async def aclose(self) -> None:
        pass


class _Tools:
    def definitions(self) -> tuple[Any, ...]:
        from jpd.llm.base import ToolDefinition

        return (ToolDefinition(name="read", description="read a file", parameters={}),)

    def hidden(self, name: str) -> bool:
        return False

    async def run(self, calls: Sequence[Any], on_result: Any = None) -> list[Any]:
        from jpd.tools.base import ToolResultData

        results = [ToolResultData(id=c.id, content="x" * OUTPUT, is_error=False) for c in calls]
        for result in results:
            if on_result:
                on_result(result)
        return results


class _Log:
    def append(self, conversation_id: str, event: Any) -> None:
        pass

    async def sync(self, conversation_id: str) -> None:
        pass


class _Hub:
    def publish(self, conversation_id: str, turn_id: str, event: Any) -> None:
        pass

    def delta_sender(self, conversation_id: str, turn_id: str) -> Any:
        return lambda kind, text: None


async def _conversation(turns: int, compact: bool) -> list[int]:
    """Tokens of the last request of each turn."""
    from jpd.config import Config
    from jpd.core.transcript import Transcript
    from jpd.core.turn import Turn
    from jpd.core.turn_setup import turn_spec
    from jpd.llm.history import MessageHistory

    cfg = Config.model_validate(
        {
            "assistant": {"model": {"id": "test/bench", "context_window": WINDOW}},
            "conversation": {"context": {"compact": compact}},
        }
    )
    model, history, per_turn = _Model(), MessageHistory(), []
    for n in range(turns):
        spec = turn_spec(
            cfg,
            conversation_id="c",
            turn_id=f"t{n}",
            message=f"question {n}: read the next file",
            provider=model,
            tools=_Tools(),
            transcript=Transcript(history),
            workspace=None,
        )
        await Turn(spec, _Log(), _Hub(), datetime.now(UTC)).run()  # type: ignore[arg-type]
        per_turn.append(model.sent[-1])
    return per_turn


def context(turns: int = 200) -> list[Row]:
    """The tokens sent per turn, with compaction beside without it."""
    with_ = anyio.run(_conversation, turns, True)
    without = anyio.run(_conversation, turns, False)
    marks = [0, 9, 49, 99, 149, turns - 1]
    print(f"tokens sent on turns {', '.join(str(i + 1) for i in marks)} of {turns}:")
    print("  with compaction:    " + ", ".join(f"{with_[i]:,}" for i in marks))
    print("  without compaction: " + ", ".join(f"{without[i]:,}" for i in marks))
    return [
        Row(
            f"tokens sent in {turns} turns ({OUTPUT:,}-char tool outputs, {WINDOW:,} window)",
            f"{sum(with_):,} (max {max(with_):,})",
            f"{sum(without):,} uncompacted (max {max(without):,})",
            sum(with_) / sum(without),
            f"every request under the {WINDOW:,} window",
        )
    ]
