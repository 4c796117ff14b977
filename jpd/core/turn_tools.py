"""Assembles the tool side of a turn (or a `tool/call`): catalog, router, permissions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from jpd.conversation.resume import ResumePlan
from jpd.inquiry.pending import PendingQuestions
from jpd.inquiry.recorder import EventLog, InquiryRecorder
from jpd.inquiry.router import InquiryBackend, Router
from jpd.mcp.model import McpCaller
from jpd.process_groups import ToolProcesses
from jpd.protocol.detached import DetachedMode
from jpd.protocol.modes import PermissionMode
from jpd.tools.catalog import EffectiveTool
from jpd.tools.coordinator import CallScope, Coordinator
from jpd.tools.mcp_call import ProgressSink, Sampler
from jpd.tools.permissions import PermissionGate
from jpd.tools.protected import ProtectedPaths


class NullLog:
    """Where a `tool/call` without a conversation records: nowhere."""

    def append(self, conversation_id: str, event: object) -> None:
        """Drop the event."""

    async def sync(self, conversation_id: str) -> None:
        """Nothing to sync."""


def make_coordinator(
    *,
    tools: Mapping[str, EffectiveTool],
    pending: PendingQuestions,
    log: EventLog,
    backend: InquiryBackend | None,
    conversation_id: str,
    turn_id: str,
    root: Path,
    env: Mapping[str, str],
    detached: DetachedMode | None,
    mode: PermissionMode = "ask",
    extra_roots: tuple[Path, ...] = (),
    umask: int | None = None,
    processes: ToolProcesses | None = None,
    provider_keys: frozenset[str] = frozenset(),
    mcp: McpCaller | None = None,
    on_progress: ProgressSink | None = None,
    sampler: Sampler | None = None,
    resumed: ResumePlan | None = None,
    stopping: Callable[[], bool] = lambda: False,
    snapshots: Path | None = None,
    share_snapshots: Callable[[], None] | None = None,
    protected: ProtectedPaths | None = None,
) -> Coordinator:
    """A coordinator over `tools` with its own turn cache, attempt counters and
    permission memory; `stopping()` is true once the daemon is stopping."""
    recorder = InquiryRecorder(log, conversation_id)
    if resumed is not None:
        recorder.seed(resumed.attempts)
    router = Router(pending, recorder, backend, stopping=stopping)
    gate = PermissionGate(pending, conversation_id, turn_id, detached_override=detached, mode=mode)
    scope = CallScope(
        conversation_id=conversation_id,
        turn_id=turn_id,
        root=root,
        env=env,
        extra_roots=extra_roots,
        umask=umask,
        detached_override=detached,
        processes=processes,
        provider_keys=provider_keys,
        mcp=mcp,
        on_progress=on_progress,
        sampler=sampler,
        record=lambda event: log.append(conversation_id, event),
        snapshots=snapshots,
        share_snapshots=share_snapshots,
        answers=resumed.answers if resumed is not None else {},
        protected=protected if protected is not None else ProtectedPaths.default(),
    )
    return Coordinator(tools, router, gate, scope)
