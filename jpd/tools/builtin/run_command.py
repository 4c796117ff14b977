"""`run_command`: `sh -c` in the workspace, sandboxed (protocol.md, "run_command")."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path
from subprocess import DEVNULL, PIPE
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import ByteReceiveStream

from jpd.config.tools import ParameterConfig, ToolConfig
from jpd.conversation import events as ev
from jpd.tools.builtin import BuiltinContext
from jpd.tools.confine import Workspace
from jpd.tools.outcome import Failure, Success, ToolOutcome

# The sandbox and the output caps load with the first command: every turn builds the
# registry that imports this module, and a turn answered in text runs no command.
if TYPE_CHECKING:
    from jpd.tools.output_cap import HeadTail, LiveBudget
    from jpd.tools.sandbox import SandboxPolicy

DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 3600.0


_WRITE_REFUSED = ("Permission denied", "Read-only file system", "Operation not permitted")
_NETWORK_REFUSED = (
    "Network is unreachable",
    "Temporary failure in name resolution",
    "Could not resolve host",
    "Name or service not known",
)
_OPTIONS = "conversation.tools.run_command.options"


def sandbox_note(policy: SandboxPolicy, code: int | None, output: str) -> str:
    """For a failed command whose output reads like a sandbox refusal: that it was the
    sandbox, and which setting allows what it tried (for the model and the person)."""
    if code in (0, None):
        return ""
    notes = []
    if not policy.network and any(text in output for text in _NETWORK_REFUSED):
        notes.append(f"it has no network (`{_OPTIONS}.network = true` allows it)")
    if policy.mode != "off" and any(text in output for text in _WRITE_REFUSED):
        where = (
            "writes nowhere"
            if policy.mode == "read-only"
            else "writes only in the workspace and $TMPDIR"
        )
        notes.append(f'it {where} (`{_OPTIONS}.sandbox = "off"` lifts that)')
    if not notes:
        return ""
    return f"\nnote: the command ran in jpd's sandbox: {'; '.join(notes)}.\n"


class RunCommand:
    name = "run_command"

    def default_config(self) -> ToolConfig:
        return ToolConfig.model_validate(
            {
                "source": "builtin",
                "summary": "Run a shell command (sh -c) in the workspace, sandboxed.",
                "description": (
                    "Runs `command` with `sh -c` in the workspace. By default it may write"
                    " only in the workspace and $TMPDIR and has no network. Returns the exit"
                    " code, stdout and stderr (head and tail when long)."
                ),
                "run": "ask",
                "parameters": {
                    "command": ParameterConfig.model_validate(
                        {"type": "string", "required": True, "description": "Shell command."}
                    ),
                    "timeout_secs": ParameterConfig.model_validate(
                        {
                            "type": "integer",
                            "description": f"Seconds before the command is killed"
                            f" (default {int(DEFAULT_TIMEOUT)}).",
                        }
                    ),
                },
            }
        )

    def inquiry_source(self) -> ev.ToolSource | ev.AssistantSource:
        return ev.ToolSource(name=self.name)

    async def run(
        self, arguments: dict[str, Any], answers: dict[str, Any], ctx: BuiltinContext
    ) -> ToolOutcome:
        command = arguments.get("command")
        if not isinstance(command, str) or not command.strip():
            return Failure(message="run_command: `command` must be a non-empty string")
        timeout = arguments.get("timeout_secs", DEFAULT_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            return Failure(message="run_command: `timeout_secs` must be a positive number")
        timeout = min(float(timeout), MAX_TIMEOUT)
        from jpd.tools.output_cap import (
            KEEP_OPTION,
            LIVE_OPTION,
            LIVE_OUTPUT,
            OUTPUT_KEEP,
            CapError,
            LiveBudget,
            int_option,
        )
        from jpd.tools.sandbox import PolicyError, SandboxPolicy

        try:
            policy = SandboxPolicy.from_options(ctx.options)
            keep = int_option(ctx.options, KEEP_OPTION, OUTPUT_KEEP, 0)
            live = LiveBudget(int_option(ctx.options, LIVE_OPTION, LIVE_OUTPUT, 0))
        except (PolicyError, CapError) as error:
            return Failure(message=f"run_command: {error}")
        if ctx.mode == "auto" and policy.mode == "off":
            # Nobody approves commands in `auto`: they stay inside the sandbox.
            policy = dataclasses.replace(policy, mode="workspace-write")
        workdir = await anyio.Path(ctx.root).absolute()
        root = Path(workdir)
        if not await workdir.is_dir():
            return Failure(message=f"run_command: workspace does not exist: {root}")
        tmpdir = Path(await anyio.to_thread.run_sync(lambda: tempfile.mkdtemp(prefix="jpd-run-")))
        try:
            return await self._run(command, timeout, policy, root, tmpdir, ctx, keep, live)
        finally:
            with anyio.CancelScope(shield=True):  # a cancelled call leaves no temp dir
                await anyio.to_thread.run_sync(lambda: shutil.rmtree(tmpdir, ignore_errors=True))

    async def _run(
        self,
        command: str,
        timeout: float,  # noqa: ASYNC109 (the call's own setting)
        policy: SandboxPolicy,
        root: Path,
        tmpdir: Path,
        ctx: BuiltinContext,
        keep: int,
        live: LiveBudget,
    ) -> ToolOutcome:
        from jpd.tools.output_cap import HeadTail
        from jpd.tools.sandbox import BWRAP_FAILED, REFUSED, CageUnavailable, Launch, prepare

        roots = Workspace.of(root, ctx.options, ctx.extra_roots).roots
        if ctx.umask is not None:
            # The client's umask, set in the shell that runs the command.
            command = f"umask {ctx.umask:04o}\n{command}"
        shell = ["/bin/sh", "-c", command]
        try:
            cage: Launch = await anyio.to_thread.run_sync(
                lambda: prepare(policy, shell, root, roots, tmpdir)
            )
        except CageUnavailable as error:
            return Failure(message=f"{self._refused(policy)}: {error}")
        except NotADirectoryError as error:
            return Failure(message=f"run_command: not a folder: {error}")
        argv = cage.argv
        launch, pass_fds = ctx.processes.command(argv) if ctx.processes else (argv, ())
        env = {**ctx.env, "TMPDIR": str(tmpdir)}
        try:
            process = await anyio.open_process(
                launch,
                stdin=DEVNULL,
                stdout=PIPE,
                stderr=PIPE,
                cwd=root,
                env=env,
                start_new_session=True,
                pass_fds=pass_fds,
            )
        except OSError as error:
            return Failure(message=f"run_command: cannot start: {error.strerror or error}")
        if ctx.processes is not None:
            ctx.processes.started(process.pid)
        stdout, stderr = HeadTail(keep), HeadTail(keep)
        timed_out = False
        try:
            with anyio.move_on_after(timeout) as scope:
                async with anyio.create_task_group() as tasks:
                    assert process.stdout is not None and process.stderr is not None
                    tasks.start_soon(self._pump, process.stdout, stdout, live, ctx)
                    tasks.start_soon(self._pump, process.stderr, stderr, live, ctx)
                await process.wait()
            timed_out = scope.cancelled_caught
        finally:
            # Kills what is left of the group (all of it on timeout or cancellation).
            with anyio.CancelScope(shield=True):
                # Here, not at the top: the registry (loaded by every turn) imports this
                # module, and a turn answered in text loads no tool-running machinery.
                from jpd.tools.local_runner import _terminate_group

                await _terminate_group(process.pid)
                await process.aclose()
                if ctx.processes is not None:
                    ctx.processes.ended(process.pid)
        errors = stderr.text()
        refused = process.returncode == 125 and errors.startswith(REFUSED)
        if refused or (
            cage.level == "namespaces"
            and process.returncode == 1
            and errors.startswith(BWRAP_FAILED)
        ):
            return Failure(message=f"{self._refused(policy)}: {errors.strip()}")
        if timed_out:
            header = f"timed out after {timeout:g} s: the command and its processes were killed"
        else:
            header = f"exit code: {process.returncode}"
        note = sandbox_note(policy, process.returncode, stdout.text() + errors)
        if cage.note:
            note += f"\n{cage.note}"
        return Success(content=f"{header}\nstdout:\n{stdout.text()}\nstderr:\n{errors}{note}")

    @staticmethod
    def _refused(policy: SandboxPolicy) -> str:
        return (
            f"run_command: refused to run unsandboxed (sandbox {policy.mode!r},"
            f" network {'on' if policy.network else 'off'}, cage {policy.cage!r})"
        )

    @staticmethod
    async def _pump(
        stream: ByteReceiveStream, into: HeadTail, live: LiveBudget, ctx: BuiltinContext
    ) -> None:
        async for chunk in stream:
            into.add(chunk)
            # Live output: attached clients see it under the running call, up to the
            # call's budget (each event is kept for replay), then only the byte count.
            if ctx.on_progress is not None and ctx.tool_call_id is not None:
                publish, message = live.take(chunk)
                if publish:
                    ctx.on_progress(ctx.tool_call_id, float(into.total), None, message)
