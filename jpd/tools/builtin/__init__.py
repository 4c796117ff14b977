"""Built-in tools: the registry that the daemon and tests share.

A built-in declares its default config (description, parameters, enable, run mode),
the source its questions are recorded with (protocol.md 12.2: `tool` unless the tool says
otherwise; user config cannot change it), and how it runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from jpd.config.tools import ToolConfig
from jpd.conversation import events as ev
from jpd.protocol.modes import PermissionMode
from jpd.tools.outcome import ToolOutcome

if TYPE_CHECKING:
    from jpd.process_groups import ToolProcesses
    from jpd.tools.changes import ChangeRecorder
    from jpd.tools.mcp_call import ProgressSink
    from jpd.tools.protected import ProtectedGuard


@dataclass(frozen=True)
class BuiltinContext:
    """What a built-in may see while it runs."""

    conversation_id: str | None
    tool_docs: Mapping[str, tuple[str, str]]
    """Enabled tools of this turn: name -> (summary, full description)."""
    turn_id: str | None = None
    tool_call_id: str | None = None
    root: Path = field(default_factory=Path.cwd)
    """The workspace: where the turn's client runs (protocol.md 9.4)."""
    extra_roots: tuple[Path, ...] = ()
    """More directories the workspace tools may use besides `root` (the client's
    `environment.additionalRoots`, protocol.md 5.5)."""
    umask: int | None = None
    """The client's umask (`environment.umask`): files, folders and processes the tool
    creates get it (None: files 0644, processes the daemon's)."""
    mode: PermissionMode = "ask"
    """The turn's permission mode (protocol.md 5.5.1): in `auto` nobody is asked, so a
    command runner keeps its commands inside its sandbox."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """`conversation.tools.<name>.options` of this tool."""
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    """The tool's environment (secrets already left out, as for local tools)."""
    processes: ToolProcesses | None = None
    """Runs subprocesses under the launcher, so they die with the daemon."""
    on_progress: ProgressSink | None = None
    """Reports progress of a long call to attached clients."""
    changes: ChangeRecorder | None = None
    """Records the files this call changes, for `turn/undo` (None: outside a turn)."""
    protected: ProtectedGuard | None = None
    """Checked just before a file is written: a protected path only with the user's
    leave for that path (jpd/tools/protected.py; None: direct use in tests)."""


class BuiltinTool(Protocol):
    """A tool implemented inside the daemon."""

    @property
    def name(self) -> str: ...

    def default_config(self) -> ToolConfig:
        """Defaults that user config for this tool merges over, field by field."""
        ...

    def inquiry_source(self) -> ev.ToolSource | ev.AssistantSource:
        """The persisted source of this tool's questions (not user-overridable)."""
        ...

    async def run(
        self, arguments: dict[str, Any], answers: dict[str, Any], ctx: BuiltinContext
    ) -> ToolOutcome:
        """Run once; may return NeedsInput, and is then run again with answers."""
        ...


class BuiltinRegistry:
    """Name -> built-in tool."""

    def __init__(self, tools: Iterable[BuiltinTool] = ()) -> None:
        self._tools: dict[str, BuiltinTool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: BuiltinTool) -> None:
        """Register `tool` (a later registration of the same name replaces it)."""
        self._tools[tool.name] = tool

    def get(self, name: str) -> BuiltinTool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)


def default_registry() -> BuiltinRegistry:
    """Every built-in tool the daemon ships."""
    from jpd.tools.builtin.ask_user import AskUser
    from jpd.tools.builtin.describe_tools import DescribeTools
    from jpd.tools.builtin.fs_create_file import CreateFile
    from jpd.tools.builtin.fs_grep_files import GrepFiles
    from jpd.tools.builtin.fs_list_files import ListFiles
    from jpd.tools.builtin.fs_modify_file import ModifyFile
    from jpd.tools.builtin.fs_read_file import ReadFile
    from jpd.tools.builtin.run_command import RunCommand
    from jpd.tools.builtin.update_plan import UpdatePlan

    return BuiltinRegistry(
        [
            AskUser(),
            DescribeTools(),
            ListFiles(),
            GrepFiles(),
            ReadFile(),
            ModifyFile(),
            CreateFile(),
            RunCommand(),
            UpdatePlan(),
        ]
    )
