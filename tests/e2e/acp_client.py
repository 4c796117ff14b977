"""An ACP editor for tests: the `agent-client-protocol` package's own client side
(`spawn_agent_process` / `ClientSideConnection`) driving `jp acp` as a subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from acp import spawn_agent_process
from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AcceptElicitationResponse,
    AllowedOutcome,
    ClientCapabilities,
    DeclineElicitationResponse,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)

from tests.e2e.sockets import ROOT, TIMEOUT, Daemons, socket_env

FORMS = ClientCapabilities(elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities()))


class Editor:
    """Records every `session/update` and answers permission requests and forms with
    the test's callbacks (default: allow once; accept the form with `answer`)."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.permissions: list[tuple[ToolCallUpdate, list[PermissionOption]]] = []
        self.forms: list[tuple[str, Any]] = []
        self.incoming: list[dict[str, Any]] = []
        self.choose: Callable[[ToolCallUpdate, list[PermissionOption]], Awaitable[str]] | None = (
            None
        )
        self.fill: Callable[[str, Any], Awaitable[Any]] | None = None
        self.changed = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.changed.set()

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kw: Any
    ) -> RequestPermissionResponse:
        self.permissions.append((tool_call, options))
        choice = await self.choose(tool_call, options) if self.choose else "allow_once"
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=choice)
        )

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        self.forms.append((message, mode))
        if self.fill is not None:
            return await self.fill(message, mode)
        return DeclineElicitationResponse(action="decline")

    def observe(self, event: StreamEvent) -> None:
        if event.direction == StreamDirection.INCOMING:
            self.incoming.append(event.message)
            self.changed.set()

    def kinds(self, session_id: str | None = None) -> list[str]:
        return [u.session_update for sid, u in self.updates if session_id in (None, sid)]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(u.content.text for _, u in self.updates if u.session_update == kind)

    def of_kind(self, kind: str) -> list[Any]:
        return [u for _, u in self.updates if u.session_update == kind]

    async def wait_for(self, predicate: Callable[[], bool], what: str) -> None:
        async with asyncio.timeout(TIMEOUT):
            while not predicate():
                self.changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), 0.2)
        assert predicate(), what


def accept(answer: Any, **extra: Any) -> Callable[[str, Any], Awaitable[Any]]:
    """A form filler that accepts with `{"answer": answer, **extra}`."""

    async def fill(message: str, mode: Any) -> Any:
        return AcceptElicitationResponse(action="accept", content={"answer": answer, **extra})

    return fill


def _append(path: Path) -> Any:
    return path.open("ab")


@contextlib.asynccontextmanager
async def jp_acp(
    env: Mapping[str, str], editor: Editor, log: Path
) -> AsyncIterator[tuple[ClientSideConnection, asyncio.subprocess.Process]]:
    """`jp acp` as a subprocess, with the SDK's client connection to it (its stderr
    goes to `log`)."""
    with _append(log) as stderr:
        async with spawn_agent_process(
            editor,
            sys.executable,
            "-m",
            "jpcli",
            "acp",
            env=dict(env),
            cwd=ROOT,
            transport_kwargs={"stderr": stderr.fileno()},
            use_unstable_protocol=True,
            observers=[editor.observe],
        ) as (conn, process):
            yield conn, process


@contextlib.asynccontextmanager
async def acp_session(
    env: Mapping[str, str], editor: Editor, home: Path, capabilities: Any = None
) -> AsyncIterator[tuple[ClientSideConnection, asyncio.subprocess.Process, str]]:
    """`jp acp` initialized (with the editor's `capabilities`) and one new session in
    `home/ws`; its stderr goes to `home/acp.log`. Yields the connection, the bridge's
    process and the session id."""
    async with jp_acp(env, editor, home / "acp.log") as (conn, process):
        await conn.initialize(protocol_version=1, client_capabilities=capabilities)
        sid = (await conn.new_session(cwd=str(home / "ws"), mcp_servers=[])).session_id
        yield conn, process, sid


SLOW = {"text": "tick " * 40, "chunk": 5, "delay_ms": 100}
MCP_SERVER = Path(__file__).parent.parent / "fixtures" / "mcp_server.py"

ASKER = """\
kind = args.get("kind", "boolean")
answer_type = {"type": kind}
if kind == "multi_select":
    answer_type.update(options=["a", "b", "c"], min_items=1)
if kind == "number":
    answer_type.update(minimum=1, maximum=10, integer=True)
if "q" in answers:
    print(json.dumps({"type": "success", "content": f"got {answers['q']!r}"}))
else:
    question = {"id": "q", "text": f"Give a {kind}", "answer_type": answer_type}
    print(json.dumps({"type": "needs_input", "question": question}))
"""
DEPLOY = """\
print(json.dumps({"type": "success", "content": "deployed " + args.get("env", "?")}))
"""
ENV_ARG = {"parameters.env": '{ type = "string" }'}
KIND_ARG = {"parameters.kind": '{ type = "string" }'}


def make_env(home: Path, daemons: Daemons, responses: list[dict[str, Any]]) -> dict[str, str]:
    """The environment of a `jp acp` bridge with its workspace `home/ws`; the shared daemon
    the bridge starts is stopped at the end of the test."""
    env = socket_env(home, responses)
    (home / "ws").mkdir(exist_ok=True)
    daemons.watch(env)
    return env
