"""`run_command` and its kernel sandbox, run as real processes.

The attacks: writes outside the workspace (and in /tmp outside the private temp dir),
TCP and UDP to a listener of the test on 127.0.0.1, a timeout that must leave no
process (grandchildren included), and a policy the kernel cannot provide.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from jpd.process_groups import ToolProcesses
from jpd.protocol.modes import PermissionMode
from jpd.tools import sandbox
from jpd.tools.builtin import BuiltinContext, default_registry
from jpd.tools.builtin.run_command import RunCommand
from jpd.tools.outcome import Failure, Success, ToolOutcome
from jpd.tools.output_cap import OUTPUT_KEEP as KEEP


def run(
    workspace: Path,
    command: str,
    options: dict[str, Any] | None = None,
    mode: PermissionMode = "ask",
    **arguments: Any,
) -> ToolOutcome:
    ctx = BuiltinContext(
        mode=mode,
        conversation_id=None,
        tool_docs={},
        tool_call_id="call-1",
        root=workspace,
        options=options or {},
        env={"PATH": os.environ["PATH"]},
        # As in the daemon: under the launcher, which reaps what the command orphans.
        processes=ToolProcesses(workspace.parent / "data"),
    )
    try:
        return anyio.run(RunCommand().run, {"command": command, **arguments}, {}, ctx)
    finally:
        assert ctx.processes is not None
        ctx.processes.close()


def content(outcome: ToolOutcome) -> str:
    assert isinstance(outcome, Success), outcome
    return outcome.content


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def test_registered_with_ask_and_runs_in_the_workspace(workspace: Path) -> None:
    tool = default_registry().get("run_command")
    assert tool is not None and tool.default_config().run == "ask"
    out = content(run(workspace, "pwd; echo err >&2; exit 3"))
    assert out.startswith("exit code: 3")
    assert str(workspace) in out and "err" in out


def test_workspace_write_allows_workspace_and_private_tmp(workspace: Path) -> None:
    out = content(run(workspace, 'echo hi > a.txt && echo t > "$TMPDIR/t" && cat "$TMPDIR/t"'))
    assert out.startswith("exit code: 0"), out
    assert (workspace / "a.txt").read_text() == "hi\n"


def test_write_outside_workspace_refused(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    out = content(run(workspace, f"echo x > {outside}"))
    assert not out.startswith("exit code: 0") and not outside.exists()
    # /tmp itself, outside the private temp dir
    target = Path("/tmp") / f"jpd-test-escape-{os.getpid()}"
    out = content(run(workspace, f"echo x > {target}; mkdir {target}.d"))
    assert not target.exists() and not Path(f"{target}.d").exists()
    # deleting or renaming out of the workspace is a write too
    victim = tmp_path / "victim"
    victim.write_text("keep")
    content(run(workspace, f"rm -f {victim}; mv {victim} ./stolen"))
    assert victim.read_text() == "keep"


def test_read_only_mode(workspace: Path) -> None:
    out = content(
        run(workspace, 'echo x > a; echo t > "$TMPDIR/t" && echo tmp-ok', {"sandbox": "read-only"})
    )
    assert not (workspace / "a").exists() and "tmp-ok" in out


def test_auto_mode_keeps_commands_in_the_sandbox(workspace: Path, tmp_path: Path) -> None:
    """In the `auto` permission mode nobody approves a command: `sandbox = "off"` does
    not apply, the command may write only in the workspace."""
    outside = tmp_path / "outside.txt"
    out = content(run(workspace, f"echo x > {outside}; echo in > a", {"sandbox": "off"}, "auto"))
    assert not outside.exists() and (workspace / "a").read_text() == "in\n", out


def test_off_mode_writes_anywhere(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    content(run(workspace, f"echo x > {outside}", {"sandbox": "off", "network": True}))
    assert outside.read_text() == "x\n"


def _connect_script(port: int, kind: str) -> str:
    if kind == "tcp":
        code = (
            f"import socket; socket.create_connection(('127.0.0.1', {port}), 2); print('CONNECTED')"
        )
    else:
        code = (
            "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM);"
            f" s.sendto(b'leak', ('127.0.0.1', {port})); print('SENT')"
        )
    return f'python3 -c "{code}"'


def test_network_refused_tcp_and_udp(workspace: Path) -> None:
    with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        udp.bind(("127.0.0.1", 0))
        udp.settimeout(0.5)
        out = content(run(workspace, _connect_script(tcp.getsockname()[1], "tcp")))
        assert "CONNECTED" not in out
        content(run(workspace, _connect_script(udp.getsockname()[1], "udp")))
        with pytest.raises(TimeoutError):
            udp.recvfrom(16)
        # network = true lets it through
        out = content(
            run(workspace, _connect_script(tcp.getsockname()[1], "tcp"), {"network": True})
        )
        assert "CONNECTED" in out


def survivors(token: str) -> list[int]:
    """Host pids of live processes whose command line holds `token` (pids seen inside a
    PID namespace mean nothing outside it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if token.encode() not in (entry / "cmdline").read_bytes():
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def sleeper(token: str) -> str:
    return f"python3 -c 'import time; time.sleep(600)' {token}"


@pytest.mark.parametrize("cage", ["auto", "landlock"])
def test_timeout_kills_grandchildren(workspace: Path, cage: str) -> None:
    token = f"jpd-test-grandchild-{os.getpid()}-{cage}"
    command = f"({sleeper(token)} & wait) & setsid {sleeper(token)} & {sleeper(token)}"
    out = content(run(workspace, command, {"cage": cage}, timeout_secs=1))
    assert out.startswith("timed out after 1 s")
    assert survivors(token) == []


def test_huge_output_keeps_head_and_tail(workspace: Path) -> None:
    out = content(
        run(workspace, "echo FIRST; head -c 5000000 /dev/zero | tr '\\0' x; echo; echo LAST")
    )
    assert "FIRST" in out and "LAST" in out and "bytes left out" in out
    assert len(out) < 5 * KEEP


def test_unavailable_sandbox_is_refused(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A stand-in for a kernel without Landlock: the confining script reports refusal.
    fake = tmp_path / "no_landlock.py"
    fake.write_text(
        "import sys\n"
        "sys.stderr.write('jpd-sandbox: cannot sandbox: Landlock (not supported)\\n')\n"
        "sys.exit(125)\n"
    )
    monkeypatch.setattr(sandbox, "SANDBOX_EXEC", fake)
    marker = workspace / "ran"
    outcome = run(workspace, f"touch {marker}", {"cage": "landlock"})
    assert isinstance(outcome, Failure) and "refused to run unsandboxed" in outcome.message
    assert not marker.exists()


def test_bad_arguments_and_options(workspace: Path) -> None:
    assert isinstance(run(workspace, ""), Failure)
    assert isinstance(run(workspace, "true", timeout_secs=-1), Failure)
    bad = run(workspace, "true", {"sandbox": "none"})
    assert isinstance(bad, Failure) and "options.sandbox" in bad.message
    assert isinstance(run(workspace, "true", {"network": "yes"}), Failure)


def test_live_output_reaches_progress(workspace: Path) -> None:
    seen: list[tuple[str, str | None]] = []
    ctx = BuiltinContext(
        conversation_id=None,
        tool_docs={},
        tool_call_id="call-7",
        root=workspace,
        env={"PATH": os.environ["PATH"]},
        on_progress=lambda call, progress, total, message: seen.append((call, message)),
    )
    anyio.run(RunCommand().run, {"command": "echo one; echo two >&2"}, {}, ctx)
    assert {call for call, _ in seen} == {"call-7"}
    assert "one" in "".join(m or "" for _, m in seen) and "two" in "".join(m or "" for _, m in seen)


def test_symlink_out_of_the_workspace_does_not_open_a_way(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "link").symlink_to(outside)
    content(run(workspace, "echo x > link/file; mkdir link/dir"))
    assert list(outside.iterdir()) == []


def test_confiner_refuses_what_it_cannot_apply(tmp_path: Path) -> None:
    # Real refusals of the confining script: a rule it cannot add, an unknown mode or
    # level, a malformed command line.
    marker = tmp_path / "ran"
    confine = [sys.executable, "-I", "-S", str(sandbox.SANDBOX_EXEC)]
    for options in (
        [f"write={tmp_path / 'missing'}"],
        ["mode=sideways"],
        ["level=sideways"],
        ["nonsense"],
    ):
        done = subprocess.run(
            [*confine, *options, "--", "touch", str(marker)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 125 and done.stderr.startswith(sandbox.REFUSED), options
        assert not marker.exists()


def test_cancelled_call_leaves_no_process_and_no_temp_dir(workspace: Path) -> None:
    ctx = BuiltinContext(
        conversation_id=None,
        tool_docs={},
        root=workspace,
        env={"PATH": os.environ["PATH"]},
        processes=ToolProcesses(workspace.parent / "data"),
    )
    token = f"jpd-test-cancelled-{os.getpid()}"
    command = f'echo "$TMPDIR" > tmpdir; setsid {sleeper(token)} & {sleeper(token)} & wait'

    async def cancel_soon() -> None:
        with anyio.move_on_after(1):
            await RunCommand().run({"command": command}, {}, ctx)

    anyio.run(cancel_soon)
    ctx.processes.close()
    assert not Path((workspace / "tmpdir").read_text().strip()).exists()
    assert survivors(token) == []


@pytest.mark.parametrize("cage", ["auto", "landlock"])
def test_off_without_network_writes_anywhere_but_has_no_network(
    workspace: Path, tmp_path: Path, cage: str
) -> None:
    outside = tmp_path / "outside.txt"
    with socket.socket() as tcp:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        script = _connect_script(tcp.getsockname()[1], "tcp")
        out = content(
            run(workspace, f"echo x > {outside}; {script}", {"sandbox": "off", "cage": cage})
        )
    assert outside.read_text() == "x\n" and "CONNECTED" not in out, out


def test_a_sandbox_refusal_is_explained() -> None:
    from jpd.tools.builtin.run_command import sandbox_note
    from jpd.tools.sandbox import SandboxPolicy

    confined = SandboxPolicy()
    note = sandbox_note(confined, 7, "curl: (7) Couldn't connect: Network is unreachable")
    assert "jpd's sandbox" in note and "options.network = true" in note
    assert 'sandbox = "off"' in sandbox_note(confined, 1, "sh: x: Permission denied")
    assert sandbox_note(confined, 0, "Permission denied") == ""
    assert sandbox_note(SandboxPolicy(mode="off", network=True), 1, "Permission denied") == ""
