"""The tool coordinator: runs the tool calls of one model response.

Calls run in parallel; results come back in call order. Each call is checked (known,
enabled, arguments valid), permitted (`run`), executed with the `needs_input` loop
(questions go to the inquiry router; answers accumulate by question id, latest
wins), and its result permitted (`deliver`) before the model sees it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from jpd.config.trust import is_workspace_config, note_agent_written
from jpd.conversation import events as ev
from jpd.conversation.events import ToolImage
from jpd.inquiry.answer_tool import ANSWER_INQUIRY
from jpd.inquiry.router import QuestionContext, Resolved, Router
from jpd.llm.base import ToolCallPart
from jpd.mcp.model import McpCaller
from jpd.process_groups import ToolProcesses
from jpd.protocol.detached import DetachedMode
from jpd.tools.base import ResultCallback, ToolResultData
from jpd.tools.builtin import BuiltinContext
from jpd.tools.catalog import EffectiveTool
from jpd.tools.changes import ChangeRecorder
from jpd.tools.command_changes import CommandChanges
from jpd.tools.confine import Workspace
from jpd.tools.environment import tool_environment
from jpd.tools.local_runner import run_local_tool
from jpd.tools.mcp_call import McpCallHooks, ProgressSink, Sampler
from jpd.tools.outcome import Failure, NeedsInput, Success, ToolOutcome
from jpd.tools.permissions import PermissionGate
from jpd.tools.protected import ProtectedGuard, ProtectedPaths, write_target
from jpd.tools.schema import validate_arguments

log = logging.getLogger(__name__)

MAX_QUESTIONS = 16
"""A tool that keeps asking after this many answers is stopped."""


@dataclass(frozen=True)
class CallScope:
    """Where tools of this turn run and whom they belong to."""

    conversation_id: str
    turn_id: str
    root: Path
    env: Mapping[str, str]
    extra_roots: tuple[Path, ...] = ()
    """More directories the workspace tools may use (`environment.additionalRoots`)."""
    umask: int | None = None
    """The client's umask (`environment.umask`): what the tools create gets it."""
    detached_override: DetachedMode | None = None
    processes: ToolProcesses | None = None
    """Runs tools under the launcher, so they die with the daemon."""
    provider_keys: frozenset[str] = frozenset()
    """Variables holding provider API keys: never passed to tools."""
    mcp: McpCaller | None = None
    """Calls the tools of MCP servers (None: no MCP tool can run)."""
    on_progress: ProgressSink | None = None
    sampler: Sampler | None = None
    """Completes MCP sampling requests (None: they are refused)."""
    record: Callable[[ev.Event], None] | None = None
    """Appends an event to the conversation's log (MCP sampling exchanges)."""
    snapshots: Path | None = None
    """The conversation's `snapshots/` folder: file changes are recorded (undoable)."""
    share_snapshots: Callable[[], None] | None = None
    """In a fleet: shares the snapshots kept so far with the other members (blocking),
    called after a snapshot is kept and before the file changes."""
    answers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Tool call id -> the answers its questions got before the daemon stopped: a
    resumed turn re-runs the call with them (protocol.md 12.4)."""
    protected: ProtectedPaths = field(default_factory=ProtectedPaths.default)
    """`conversation.protected_paths`: written only when the user allows each write."""


class Coordinator:
    """Implements `CallRunner` for one turn (or one `tool/call`)."""

    def __init__(
        self,
        tools: Mapping[str, EffectiveTool],
        router: Router,
        gate: PermissionGate,
        scope: CallScope,
    ) -> None:
        self._tools = tools
        self._router = router
        self._gate = gate
        self._scope = scope
        self._images: dict[str, tuple[ToolImage, ...]] = {}
        self._approved: dict[str, frozenset[str]] = {}
        """Call id -> the protected paths the user allowed it to write."""
        self._watch: CommandChanges | None = None
        if scope.snapshots is not None and scope.record is not None:
            self._watch = CommandChanges(
                scope.root,
                scope.env,
                scope.snapshots,
                scope.record,
                scope.turn_id,
                share=scope.share_snapshots,
            )

    async def run(
        self, calls: Sequence[ToolCallPart], on_result: ResultCallback | None = None
    ) -> list[ToolResultData]:
        """Run `calls` concurrently; each result goes to `on_result` as soon as its call
        ends (protocol.md 9.3); returns the results in the order of `calls`."""
        results: list[ToolResultData | None] = [None] * len(calls)

        async def one(index: int, call: ToolCallPart) -> None:
            content, is_error = await self.run_one(call)
            images = self._images.pop(call.id, ())
            result = ToolResultData(id=call.id, content=content, is_error=is_error, images=images)
            results[index] = result
            if on_result is not None:
                on_result(result)

        before = await self._watch.before() if self._runs_commands(calls) and self._watch else None
        try:
            async with anyio.create_task_group() as tg:
                for index, call in enumerate(calls):
                    tg.start_soon(one, index, call)
        finally:
            if before is not None and self._watch is not None:
                with anyio.CancelScope(shield=True):  # a cancelled command's changes too
                    await self._watch.after(before)
        return [r for r in results if r is not None]

    def _runs_commands(self, calls: Sequence[ToolCallPart]) -> bool:
        """Whether a call of the batch runs a command (whose changes git must see)."""
        for call in calls:
            tool = self._tools.get(call.name)
            if tool is None or not tool.enabled or tool.mcp is not None:
                continue
            if tool.builtin is None or call.name == "run_command":
                return True
        return False

    async def run_one(self, call: ToolCallPart) -> tuple[str, bool]:
        """One call, start to finish -> (content, is_error)."""
        if call.name == ANSWER_INQUIRY:
            return (
                "answer_inquiry is only for answering a question you were asked about a "
                "paused tool; there is no open question in this call.",
                True,
            )
        tool = self._tools.get(call.name)
        if tool is None or not tool.enabled:
            available = ", ".join(sorted(n for n, t in self._tools.items() if t.enabled))
            state = "is disabled in this turn" if tool else "does not exist"
            return (f"Tool {call.name!r} {state}. Available tools: {available or 'none'}.", True)
        problems = validate_arguments(tool.schema, call.arguments)
        if problems:
            listed = "; ".join(problems)
            return (f"Invalid arguments for {call.name}: {listed}. Fix them and call again.", True)
        config = tool.config
        refused_by_mode = self._gate.mode_refusal(call.name)
        if refused_by_mode is not None:
            return (f"This tool call ({call.name}) was refused by {refused_by_mode}.", True)
        if config.run == "skip":
            return (f"The {call.name} tool call was skipped by configuration (run = skip).", True)
        target = self._protected_target(tool, call)
        if target is not None or config.run == "ask":
            # An edit that cannot apply fails before anyone is asked.
            problem = await self._precheck(tool, call)
            if problem is not None:
                return problem, True
        if target is not None:
            real, shown = target
            refused = await self._gate.protected_refusal(
                call.name, config, call.id, call.arguments, shown
            )
            self._decided(call, "run", refused)
            if refused is not None:
                return (f"This tool call ({call.name}) was denied by {refused}.", True)
            self._approved[call.id] = frozenset({str(real)})
        elif config.run == "ask":
            refused = await self._gate.refusal("run", call.name, config, call.id, call.arguments)
            self._decided(call, "run", refused)
            if refused is not None:
                return (f"This tool call ({call.name}) was denied by {refused}.", True)

        try:
            content, is_error = await self._execute(tool, call)
        finally:
            self._approved.pop(call.id, None)
        if target is not None and not is_error and is_workspace_config(target[0]):
            await anyio.to_thread.run_sync(self._note_config_write, target[0])

        if config.result == "skip":
            return (
                f"The {call.name} tool ran, but its result is not shared (result = skip).",
                is_error,
            )
        if config.result == "ask":
            refused = await self._gate.refusal(
                "deliver", call.name, config, call.id, call.arguments, content
            )
            self._decided(call, "deliver", refused)
            if refused is not None:
                return (f"The result of {call.name} was withheld by {refused}.", True)
        return content, is_error

    def _note_config_write(self, real: Path) -> None:
        """The agent wrote a workspace config: recorded for the trust prompt."""
        try:
            raw = real.read_bytes()
        except OSError:
            return
        note_agent_written(real, raw, self._scope.env)

    def _protected_target(self, tool: EffectiveTool, call: ToolCallPart) -> tuple[Path, str] | None:
        """The protected file a writing built-in call names (real path, as shown), if any."""
        if tool.builtin is None:
            return None
        ws = Workspace.of(self._scope.root, tool.config.options, self._scope.extra_roots)
        real = write_target(call.name, call.arguments, ws)
        if real is None:
            return None
        shown = self._scope.protected.protected(ws, real)
        return None if shown is None else (real, shown)

    async def _execute(self, tool: EffectiveTool, call: ToolCallPart) -> tuple[str, bool]:
        if tool.mcp is not None:
            return await self._call_mcp(tool, call)
        answers: dict[str, Any] = dict(self._scope.answers.get(call.id, {}))
        for _ in range(MAX_QUESTIONS + 1):
            outcome = await self._invoke(tool, call, answers)
            if isinstance(outcome, Success):
                return outcome.content, False
            if isinstance(outcome, Failure):
                return outcome.render(), True
            assert isinstance(outcome, NeedsInput)
            question = outcome.question
            resolution = await self._router.resolve(
                QuestionContext(
                    conversation_id=self._scope.conversation_id,
                    turn_id=self._scope.turn_id,
                    tool_name=tool.name,
                    tool_call_id=call.id,
                    source=self._source(tool),
                    question=question,
                    config=tool.config.questions.get(question.id),
                    detached=tool.config.detached_policy("tool", self._scope.detached_override),
                )
            )
            if not isinstance(resolution, Resolved):
                return resolution.message, True
            answers[question.id] = resolution.answer
        return (f"{tool.name} kept asking questions ({MAX_QUESTIONS}); stopped.", True)

    async def _call_mcp(self, tool: EffectiveTool, call: ToolCallPart) -> tuple[str, bool]:
        assert tool.mcp is not None
        if self._scope.mcp is None:
            return (f"MCP tool {tool.name!r} cannot run here (no MCP client).", True)
        hooks = McpCallHooks(
            tool=tool,
            call=call,
            router=self._router,
            gate=self._gate,
            conversation_id=self._scope.conversation_id,
            turn_id=self._scope.turn_id,
            detached_override=self._scope.detached_override,
            on_progress=self._scope.on_progress,
            sampler=self._scope.sampler,
            record=self._scope.record,
        )
        result = await self._scope.mcp.call(
            tool.mcp, dict(call.arguments), hooks, tool.config.timeout
        )
        if result.images:
            # Delivered beside the text by `run` (a `tool/call` reports the text only).
            self._images[call.id] = tuple(
                ToolImage(mime_type=mime, data=data) for mime, data in result.images
            )
        return result.content, result.is_error

    def _decided(self, call: ToolCallPart, kind: str, refused: str | None) -> None:
        """Record a permission decision in the conversation's log."""
        if self._scope.record is not None:
            self._scope.record(
                ev.PermissionDecision(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    kind=kind,
                    allowed=refused is None,
                    refused_by=refused,
                )
            )

    async def _precheck(self, tool: EffectiveTool, call: ToolCallPart) -> str | None:
        """A built-in's check of its arguments against the workspace before anyone is
        asked (an edit whose old text is not in the file fails without a prompt)."""
        check = getattr(tool.builtin, "precheck", None)
        if check is None:
            return None
        ws = Workspace.of(
            self._scope.root, tool.config.options, self._scope.extra_roots, self._scope.umask
        )
        problem: str | None = await check(dict(call.arguments), ws)
        return problem

    def _source(self, tool: EffectiveTool) -> ev.ToolSource | ev.AssistantSource:
        # protocol.md 12.2: provenance comes from the tool itself, never from user config.
        if tool.builtin is not None:
            return tool.builtin.inquiry_source()
        return ev.ToolSource(name=tool.name)

    def _recorder(self, call_id: str) -> ChangeRecorder | None:
        scope = self._scope
        if scope.snapshots is None or scope.record is None:
            return None
        return ChangeRecorder(
            scope.snapshots, self._noted, scope.turn_id, call_id, share=scope.share_snapshots
        )

    def _noted(self, event: ev.Event) -> None:
        """Record a workspace tool's change; the command watch then leaves that file."""
        if isinstance(event, ev.FileChanged) and self._watch is not None:
            self._watch.recorded.add(event.path)
        assert self._scope.record is not None
        self._scope.record(event)

    async def _invoke(
        self, tool: EffectiveTool, call: ToolCallPart, answers: dict[str, Any]
    ) -> ToolOutcome:
        if tool.builtin is not None:
            docs = {name: _docs(t) for name, t in self._tools.items() if t.enabled}
            ctx = BuiltinContext(
                conversation_id=self._scope.conversation_id,
                tool_docs=docs,
                turn_id=self._scope.turn_id,
                tool_call_id=call.id,
                root=self._scope.root,
                extra_roots=self._scope.extra_roots,
                umask=self._scope.umask,
                mode=self._gate.mode,
                options=dict(tool.config.options),
                env=tool_environment(self._scope.env, tool.config.env, self._scope.provider_keys),
                processes=self._scope.processes,
                on_progress=self._scope.on_progress,
                changes=self._recorder(call.id),
                protected=ProtectedGuard(
                    self._scope.protected, self._approved.get(call.id, frozenset())
                ),
            )
            try:
                return await tool.builtin.run(dict(call.arguments), dict(answers), ctx)
            except Exception as exc:
                log.exception("built-in tool %s failed", tool.name)
                return Failure(message=f"{tool.name} failed: {type(exc).__name__}: {exc}")
        assert tool.config.command is not None
        return await run_local_tool(
            name=tool.name,
            command=tool.config.command,
            arguments=dict(call.arguments),
            answers=dict(answers),
            options=dict(tool.config.options),
            root=self._scope.root,
            conversation_id=self._scope.conversation_id,
            timeout=tool.config.timeout,
            max_output=tool.config.max_output,
            env=tool_environment(self._scope.env, tool.config.env, self._scope.provider_keys),
            processes=self._scope.processes,
            umask=self._scope.umask,
        )


def _docs(tool: EffectiveTool) -> tuple[str, str]:
    """(summary, full description) for `describe_tools`; MCP tools name their server."""
    summary = tool.config.summary or ""
    description = tool.config.description or summary
    if tool.mcp is not None:
        description = f"{description}\n\n(MCP server: {tool.mcp.server})".lstrip()
    return summary, description
