"""The pipe protocol between the daemon and its embedded-model worker (protocol.md 8.2).

Each frame is a 4-byte big-endian length, then that many bytes of JSON: one of the
models below. The daemon writes `Command`s to the worker's stdin; the worker writes
`Reply`s to its stdout (a private copy of fd 1: stray prints of native code go to
stderr). Every command carries an id that its replies repeat. A generation's events
travel in `Events` frames, several per frame when they were produced together, and end
with exactly one `Done` or `Failed`; a `CountTokens` ends with one `Count` or `Failed`.
"""

import logging
import struct
from typing import Annotated, Literal

import anyio
from anyio.abc import ByteSendStream
from anyio.streams.buffered import BufferedByteReceiveStream
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from jpd.llm.base import Finish, ModelRequest, TextDelta, ToolCallEvent, UsageEvent

MAX_FRAME = 64 * 1024 * 1024
"""Larger frames mean a broken peer (a request holds at most the context window)."""

_HEADER = struct.Struct(">I")


class _Frame(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    id: int


# --- daemon to worker --------------------------------------------------------------


class Generate(_Frame):
    op: Literal["generate"] = "generate"
    request: ModelRequest


class CountTokens(_Frame):
    op: Literal["count_tokens"] = "count_tokens"
    request: ModelRequest


class Cancel(_Frame):
    """Stop generation `id` at the next token; the worker then replies `Done`."""

    op: Literal["cancel"] = "cancel"


Command = Annotated[Generate | CountTokens | Cancel, Field(discriminator="op")]


# --- worker to daemon --------------------------------------------------------------

WorkerEvent = Annotated[
    TextDelta | ToolCallEvent | UsageEvent | Finish, Field(discriminator="kind")
]
"""What the embedded model yields (it never retries, nor reasons)."""


class Events(_Frame):
    op: Literal["events"] = "events"
    events: list[WorkerEvent]


class Done(_Frame):
    op: Literal["done"] = "done"


class Failed(_Frame):
    op: Literal["failed"] = "failed"
    message: str
    unavailable: bool = False
    """The provider cannot be used at all (`ProviderUnavailable`), e.g. a bad model file."""
    overflow: bool = False
    """The prompt does not fit the context (`ContextOverflow`: the turn compacts)."""


class Count(_Frame):
    op: Literal["count"] = "count"
    tokens: int


Reply = Annotated[Events | Done | Failed | Count, Field(discriminator="op")]

COMMAND: TypeAdapter[Command] = TypeAdapter(Command)
REPLY: TypeAdapter[Reply] = TypeAdapter(Reply)


class WorkerSettings(BaseModel):
    """How the daemon configures its worker (the `providers.local` section)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    parent: int
    """The daemon's pid: the worker exits at once if it already has another parent."""
    model_path: str | None = None
    n_ctx: int = 2048
    n_threads: int | None = None
    seed: int = 0
    idle_timeout: float = 600.0
    log_level: int = logging.WARNING


class FrameError(Exception):
    """The peer sent something that is not a frame of this protocol."""


def encode(frame: BaseModel) -> bytes:
    """One frame, header included."""
    body = frame.model_dump_json().encode()
    return _HEADER.pack(len(body)) + body


async def send(stream: ByteSendStream, *frames: BaseModel) -> None:
    """Write `frames` in one write (whole: a cancelled half frame would break the pipe)."""
    data = b"".join(encode(frame) for frame in frames)
    with anyio.CancelScope(shield=True):
        await stream.send(data)


async def receive_body(stream: BufferedByteReceiveStream) -> bytes:
    """The next frame's JSON. Raises `anyio.IncompleteRead` or `anyio.EndOfStream` at
    end of stream, `FrameError` on a length no frame has.

    Cancel-safe: cancelled while waiting for a frame, nothing is consumed (the buffered
    stream keeps partial data); once the header is read, the body (written with it) is
    read shielded.
    """
    (size,) = _HEADER.unpack(await stream.receive_exactly(_HEADER.size))
    if size > MAX_FRAME:
        raise FrameError(f"frame of {size} bytes")
    with anyio.CancelScope(shield=True):
        body = await stream.receive_exactly(size)
    return body
