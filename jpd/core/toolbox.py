"""The daemon's tools: the built-in tools, the MCP servers and the record of tool
processes (each made on first use), the tool catalog of a config, and the coordinator
that runs a turn's or a `tool/call`'s tools with them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anyio.abc import TaskGroup

from jpd.core.hub import EventHub
from jpd.core.request_env import RequestEnv
from jpd.inquiry.pending import PendingQuestions
from jpd.protocol.modes import PermissionMode
from jpd.protocol.turn_requests import ToolToggle

# Start-up imports only what `initialize` needs (protocol.md section 4, "Start-up"):
# the config, tools, inquiries and MCP load with the first use.
if TYPE_CHECKING:
    from jpd.config import Config
    from jpd.conversation.resume import ResumePlan
    from jpd.inquiry.backend import LlmInquiryBackend
    from jpd.inquiry.recorder import EventLog
    from jpd.mcp.manager import McpManager
    from jpd.process_groups import ToolProcesses
    from jpd.tools.builtin import BuiltinRegistry
    from jpd.tools.catalog import EffectiveTool
    from jpd.tools.coordinator import Coordinator


class Toolbox:
    """What the daemon runs tools with; `stopping()` is true once the daemon stops."""

    def __init__(
        self,
        task_group: TaskGroup,
        data_dir: Path,
        questions: PendingQuestions,
        hub: EventHub,
        stopping: Callable[[], bool],
    ) -> None:
        self._tg = task_group
        self._data_dir = data_dir
        self._questions = questions
        self._hub = hub
        self._stopping = stopping
        self._builtins: BuiltinRegistry | None = None
        self._mcp: McpManager | None = None
        self._processes: ToolProcesses | None = None
        self._last_catalog: tuple[Config, list[ToolToggle], dict[str, EffectiveTool]] | None = None

    @property
    def builtins(self) -> BuiltinRegistry:
        """The built-in tools, created on first use."""
        if self._builtins is None:
            from jpd.tools.builtin import default_registry

            self._builtins = default_registry()
        return self._builtins

    @property
    def mcp(self) -> McpManager:
        """The MCP servers (protocol.md section 9.6), created on first use."""
        if self._mcp is None:
            from jpd.mcp.manager import McpManager

            self._mcp = McpManager(self._tg)
        return self._mcp

    @property
    def processes(self) -> ToolProcesses:
        """The lifeline and record of this daemon's tool processes, made on first use."""
        if self._processes is None:
            from jpd.process_groups import ToolProcesses

            self._processes = ToolProcesses(self._data_dir)
        return self._processes

    def tool_launchers(self) -> dict[int, int]:
        """The tool process groups started so far (pgid: start time), for the peer rule."""
        return {} if self._processes is None else self._processes.launched()

    async def catalog(
        self, cfg: Config, toggles: list[ToolToggle], root: Path
    ) -> dict[str, EffectiveTool]:
        """The tools of `cfg`; MCP servers it enables are started (once) and listed."""
        from jpd.tools.catalog import build_catalog

        servers = {name: s for name, s in cfg.mcp.servers.items() if s.enable}
        if servers:
            return build_catalog(
                cfg, self.builtins, toggles, await self.mcp.listings(servers, root)
            )
        # Without MCP servers the tools depend on the config alone, which is the same
        # object while its files are unchanged (jpd/config/cache.py): built once for it.
        last = self._last_catalog
        if last is not None and last[0] is cfg and last[1] == toggles:
            return last[2]
        catalog = build_catalog(cfg, self.builtins, toggles)
        self._last_catalog = (cfg, list(toggles), catalog)
        return catalog

    def coordinator(
        self,
        cfg: Config,
        renv: RequestEnv,
        tools: Mapping[str, EffectiveTool],
        *,
        log: EventLog,
        backend: LlmInquiryBackend | None,
        channel: str,
        call_id: str,
        detached: Any,
        resume: ResumePlan | None = None,
        snapshots: Path | None = None,
        share_snapshots: Callable[[], None] | None = None,
        mode: PermissionMode = "ask",
    ) -> Coordinator:
        """The tool coordinator of a turn (with its inquiry backend) or of a `tool/call`."""
        from jpd.core.turn_tools import make_coordinator
        from jpd.tools.protected import ProtectedPaths

        return make_coordinator(
            tools=tools,
            pending=self._questions,
            log=log,
            backend=backend,
            conversation_id=channel,
            turn_id=call_id,
            root=renv.root,
            env=renv.env,
            extra_roots=renv.extra_roots,
            umask=renv.umask,
            detached=detached,
            mode=mode,
            processes=self.processes,
            provider_keys=cfg.providers.api_key_variables(),
            mcp=self.mcp.bound(renv.root),
            on_progress=self._progress_sink(channel, call_id) if backend else None,
            sampler=backend,
            resumed=resume,
            stopping=self._stopping,
            snapshots=snapshots,
            share_snapshots=share_snapshots,
            protected=ProtectedPaths.of(cfg.conversation.protected_paths),
        )

    def _progress_sink(
        self, conversation_id: str, turn_id: str
    ) -> Callable[[str, float, float | None, str | None], None]:
        from jpd.protocol.turn_events import ToolProgress

        def publish(
            call_id: str, progress: float, total: float | None, message: str | None
        ) -> None:
            event = ToolProgress(id=call_id, progress=progress, total=total, message=message)
            self._hub.publish(conversation_id, turn_id, event)

        return publish

    async def close_mcp(self) -> None:
        """Stop the MCP servers started so far."""
        if self._mcp is not None:
            await self._mcp.aclose()

    def close_processes(self) -> None:
        """Close the tool processes' lifeline, if one was made."""
        if self._processes is not None:
            self._processes.close()
