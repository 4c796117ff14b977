"""The `test` provider: replays a scripted list of responses and records requests.

Script file (JSON, or TOML with a top-level `responses` array):

    {"responses": [
      {"text": "Hello there", "reasoning": "...", "tool_calls": [{"id": "c1", "name": "t",
       "arguments": {}}], "finish": "end_turn", "usage": {"input_tokens": 3},
       "chunk": 8, "delay_ms": 0, "error": null}
    ]}

Each model call consumes the next response; text streams in `chunk`-character pieces
with `delay_ms` between them, so tests can cancel mid-stream. `error` makes the call
fail with that message. Every received `ModelRequest` is appended as one JSON line to
the `record` file, so tests can assert on exactly what a model would have seen.

`answer_inquiry` answers whichever inquiry the request asks, so concurrent side
requests can be scripted although responses are consumed in arrival order: the
model calls `answer_inquiry` with the inquiry id it finds (`inquiry_id "<id>"`) in
the request's last user message, and as `answer` either the given string or, for a
table `{"<inquiry id>": "<answer>", ...}`, the entry for that id. The call comes
after one `delay_ms` pause (after any text), so side requests can be made slow.
"""

import json
import re
import tomllib
from collections.abc import AsyncGenerator
from contextlib import aclosing
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jpd.llm.base import (
    EventStream,
    Finish,
    ModelRequest,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    UsageEvent,
    UserMessage,
)
from jpd.llm.errors import ProviderError, ProviderUnavailable
from jpd.protocol.usage import TokenUsage


class ScriptedToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ScriptedResponse(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    text: str = ""
    reasoning: str = ""
    # A factory of its own: not `list` (pydantic would parse the builtin's text signature,
    # compiling tokenize's patterns, ~1.5 ms once), not `[]` (deep-copied for each of a
    # script's responses: 2 ms a thousand).
    tool_calls: list[ScriptedToolCall] = Field(default_factory=lambda: [])
    finish: Literal["end_turn", "max_tokens", "tool_use"] | None = None
    usage: TokenUsage | None = None
    chunk: int = Field(default=8, ge=1)
    delay_ms: int = Field(default=0, ge=0)
    error: str | None = None
    answer_inquiry: str | dict[str, str] | None = None
    """Call `answer_inquiry` for the inquiry the request asks (see the module doc)."""


class Script(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    responses: list[ScriptedResponse]


def load_script(path: Path) -> Script:
    """Read and validate a script file; errors name the file."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ProviderUnavailable(f"test provider: cannot read script {path}: {exc}") from exc
    try:
        data = tomllib.loads(raw.decode()) if path.suffix == ".toml" else json.loads(raw)
        return Script.model_validate(data)
    except (ValueError, ValidationError) as exc:
        first = str(exc).splitlines()[0]
        raise ProviderUnavailable(f"test provider: invalid script {path}: {first}") from exc


class ScriptedProvider:
    """Replays `script` responses in order, one per model call."""

    name = "test"
    refuses_forced_tool_with_reasoning = False
    constrains_decoding = False

    def __init__(self, script: Script, record: Path | None = None) -> None:
        self._script = script
        self._record = record
        self._next = 0

    def stream(self, request: ModelRequest) -> EventStream:
        """The next scripted response as stream events (see `Provider.stream`)."""
        return aclosing(self._events(request))

    async def _events(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        if self._record is not None:
            line = request.model_dump_json() + "\n"
            await anyio.to_thread.run_sync(_append, self._record, line)
        if self._next >= len(self._script.responses):
            raise ProviderError(
                "test provider: script exhausted (no response left; a script plays once "
                "per daemon, across conversations: restart it with `jp daemon stop`, or "
                "point providers.test.script at another file)"
            )
        index = self._next
        response = self._script.responses[index]
        self._next += 1
        delay = response.delay_ms / 1000
        if response.error is not None:
            raise ProviderError(response.error)
        for piece in _chunks(response.reasoning, response.chunk):
            await anyio.sleep(delay)
            yield ReasoningDelta(text=piece)
        for piece in _chunks(response.text, response.chunk):
            await anyio.sleep(delay)
            yield TextDelta(text=piece)
        if response.answer_inquiry is not None:
            await anyio.sleep(delay)
            yield _answer_call(request, response.answer_inquiry, f"scripted_answer_{index}")
        for call in response.tool_calls:
            yield ToolCallEvent(id=call.id, name=call.name, arguments=call.arguments)
        if response.usage is not None:
            yield UsageEvent(usage=response.usage)
        calls = bool(response.tool_calls) or response.answer_inquiry is not None
        default_finish = "tool_use" if calls else "end_turn"
        yield Finish(reason=response.finish or default_finish)

    async def aclose(self) -> None:
        """Nothing to release."""


_INQUIRY_ID = re.compile(r'inquiry_id "([^"]+)"')


def _answer_call(
    request: ModelRequest, answer: str | dict[str, str], call_id: str
) -> ToolCallEvent:
    """An `answer_inquiry` call for the inquiry named in the last user message."""
    asked = next((m for m in reversed(request.messages) if isinstance(m, UserMessage)), None)
    found = _INQUIRY_ID.search(asked.content) if asked is not None else None
    if found is None:
        raise ProviderError(
            "test provider: answer_inquiry response, but the last user message names no "
            'inquiry (inquiry_id "...")'
        )
    inquiry_id = found.group(1)
    if isinstance(answer, dict):
        if inquiry_id not in answer:
            raise ProviderError(f"test provider: no scripted answer for inquiry {inquiry_id}")
        answer = answer[inquiry_id]
    return ToolCallEvent(
        id=call_id, name="answer_inquiry", arguments={"inquiry_id": inquiry_id, "answer": answer}
    )


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _append(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(line)
