"""The cage's policy and its command lines: what is hidden, protected and writable, in
which order bubblewrap mounts it, the seccomp program, and refusals for what a kernel
lacks (simulated: the test machine's kernel has everything)."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import anyio
import pytest

from jpd.process_groups import ToolProcesses
from jpd.tools import cage_policy, namespace_launcher, sandbox, sandbox_exec
from jpd.tools.builtin import BuiltinContext
from jpd.tools.builtin.run_command import RunCommand
from jpd.tools.cage_policy import CagePolicy
from jpd.tools.outcome import Failure, Success, ToolOutcome


def make_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    for name in (".ssh", ".gnupg", ".config/jp", "code/.git", "code/.jp"):
        (home / name).mkdir(parents=True)
    (home / ".netrc").write_text("machine x password y\n")
    return home


def test_secrets_that_exist_are_hidden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = make_home(tmp_path)
    runtime = Path("/run") / "user-test-does-not-exist"
    env = {"JP_DATA_DIR": str(tmp_path / "data"), "XDG_RUNTIME_DIR": str(runtime)}
    (tmp_path / "data").mkdir()
    # Under /tmp (as here): the private /tmp covers them already.
    assert str(home) not in " ".join(cage_policy.secret_paths(env, str(home)))
    monkeypatch.setattr(cage_policy, "PRIVATE_TMPS", ("/nowhere",))
    found = cage_policy.secret_paths(env, str(home))
    for name in (".ssh", ".gnupg", ".config/jp", ".netrc"):
        assert str(home / name) in found
    assert str(tmp_path / "data") in found
    assert str(home / ".aws") not in found  # missing: nothing to hide, nothing to mount


def test_git_and_jp_of_writable_roots_are_protected(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    code, other = home / "code", tmp_path / "other"
    other.mkdir()
    (other / ".git").symlink_to(code / ".git")  # a link into a writable root
    found = cage_policy.protected_paths([str(code), str(other)])
    assert found == [str(code / ".git"), str(code / ".jp")]


def argv_of(policy: CagePolicy) -> list[str]:
    return namespace_launcher.bwrap_argv(policy, ["true"])


def test_bwrap_mounts_in_an_order_where_the_narrower_rule_wins(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    # The workspace is $HOME itself: ~/.ssh must be hidden again after it is bound.
    policy = CagePolicy(
        mode="workspace-write",
        network=False,
        level="namespaces",
        workdir=str(home),
        writable=(str(home), "/tmp/jpd-run-x"),
        roots=(str(home),),
        hidden=(str(home / ".ssh"), str(home / ".netrc")),
        protected=(str(home / "code" / ".git"),),
    )
    argv = argv_of(policy)
    text = " ".join(argv)
    assert "--unshare-net" in argv and "--unshare-pid" in argv and "--die-with-parent" in argv
    assert "--new-session" in argv and text.index("--cap-drop ALL") > 0
    root = text.index("--ro-bind / /")
    tmp = text.index("--tmpfs /tmp")
    bind = text.index(f"--bind {home} {home}")
    rehide = text.rindex(f"--tmpfs {home / '.ssh'}")
    netrc = text.rindex(f"--ro-bind /dev/null {home / '.netrc'}")
    protect = text.index(f"--ro-bind {home / 'code' / '.git'} {home / 'code' / '.git'}")
    assert root < tmp < bind < rehide < protect and bind < netrc
    assert argv[argv.index("--chdir") + 1] == str(home)
    assert argv[-2:] == ["--", "true"]


def test_network_and_off_modes(tmp_path: Path) -> None:
    base: dict[str, Any] = dict(level="namespaces", workdir=str(tmp_path), writable=())
    with_net = argv_of(CagePolicy(mode="workspace-write", network=True, **base))
    assert "--unshare-net" not in with_net and "--unshare-pid" in with_net
    off = argv_of(CagePolicy(mode="off", network=False, hidden=("/x",), **base))
    assert " ".join(off).count("--bind / /") == 1 and "/x" not in off
    assert "--unshare-net" in off


def test_exec_options(tmp_path: Path) -> None:
    policy = CagePolicy(
        mode="read-only",
        network=False,
        level="landlock",
        workdir=str(tmp_path),
        writable=("/tmp/t",),
        max_processes=10,
        max_file_size=20,
    )
    assert policy.exec_options() == [
        "mode=read-only",
        "level=landlock",
        "net=0",
        "write=/tmp/t",
        "nproc=10",
        "fsize=20",
    ]


@pytest.mark.parametrize("flags", [(True, True, True), (True, False, False), (False, True, False)])
def test_seccomp_program_is_well_formed(flags: tuple[bool, bool, bool]) -> None:
    deny_unix, deny_inet, lockdown = flags
    program = sandbox_exec.seccomp_program(
        deny_unix=deny_unix, deny_inet=deny_inet, lockdown=lockdown
    )
    assert len(program) % 8 == 0 and 4 < len(program) // 8 < 256
    code = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    assert code[0] == (0x20, 0, 0, 4)  # load the architecture first
    for index, (op, jt, jf, _) in enumerate(code):
        if op & 0x07 == 0x05:  # a jump stays inside the program
            assert index + 1 + max(jt, jf) < len(code)
    assert code[-1][0] == 0x06 and code[-1][3] == 0x80000000  # wrong arch: killed


def test_seccomp_refuses_an_unknown_architecture(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = os.uname_result(("Linux", "h", "6", "v", "riscv64"))
    monkeypatch.setattr(sandbox_exec.os, "uname", lambda: fake)
    with pytest.raises(sandbox_exec.Refused, match="riscv64"):
        sandbox_exec.seccomp_program(deny_unix=True, deny_inet=False, lockdown=False)


@pytest.mark.parametrize(
    ("abi", "scopes", "needed"),
    [(0, False, "Landlock is not available"), (2, False, "ABI 3"), (5, True, "ABI 6")],
)
def test_landlock_too_old_is_refused(
    monkeypatch: pytest.MonkeyPatch, abi: int, scopes: bool, needed: str
) -> None:
    """Refused before anything is applied: never a cage with less than it says."""
    monkeypatch.setattr(sandbox_exec, "landlock_abi", lambda: abi)
    with pytest.raises(sandbox_exec.Refused, match=needed):
        sandbox_exec.restrict(["/tmp"], writes=True, scopes=scopes)


def run(workspace: Path, options: dict[str, Any]) -> ToolOutcome:
    ctx = BuiltinContext(
        conversation_id=None,
        tool_docs={},
        root=workspace,
        options=options,
        env={"PATH": os.environ["PATH"]},
        processes=ToolProcesses(workspace.parent / "data"),
    )
    try:
        return anyio.run(RunCommand().run, {"command": "echo ran > ran.txt"}, {}, ctx)
    finally:
        assert ctx.processes is not None
        ctx.processes.close()


def test_no_namespaces_refuses_or_says_it_runs_lighter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    reason = "bubblewrap cannot create namespaces here (bwrap: setting up uid map: denied)"
    monkeypatch.setattr(namespace_launcher, "unavailable", lambda: reason)
    refused = run(workspace, {"cage": "namespaces"})
    assert isinstance(refused, Failure) and "refused to run" in refused.message
    assert reason in refused.message and 'options.cage = "landlock"' in refused.message
    assert not (workspace / "ran.txt").exists()
    lighter = run(workspace, {})  # auto: the landlock cage, and the result says so
    assert isinstance(lighter, Success) and "lighter landlock cage" in lighter.content
    assert reason in lighter.content and (workspace / "ran.txt").exists()


def test_bad_cage_options(tmp_path: Path) -> None:
    for options, name in (
        ({"cage": "docker"}, "options.cage"),
        ({"max_processes": -1}, "options.max_processes"),
        ({"max_file_size": "1G"}, "options.max_file_size"),
    ):
        with pytest.raises(sandbox.PolicyError, match=name):
            sandbox.SandboxPolicy.from_options(options)


@pytest.mark.parametrize("cage", ["auto", "landlock"])
def test_file_size_limit(tmp_path: Path, cage: str) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ctx = BuiltinContext(
        conversation_id=None,
        tool_docs={},
        root=workspace,
        options={"cage": cage, "max_file_size": 1 << 20},
        env={"PATH": os.environ["PATH"]},
    )
    command = {"command": "head -c 3000000 /dev/zero > big; echo $?"}
    outcome = anyio.run(RunCommand().run, command, {}, ctx)
    assert isinstance(outcome, Success)
    assert (workspace / "big").stat().st_size <= 1 << 20


def test_read_grants_leave_out_hidden_paths_and_links_to_them(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    (home / "notes.txt").write_text("n")
    (home / "keys").symlink_to(home / ".ssh")
    (home / "up").symlink_to(home)
    data = tmp_path / "data"
    (data / "ws").mkdir(parents=True)
    (data / "conversations").mkdir()
    hidden = [str(home / ".ssh"), str(home / ".netrc"), str(data), str(home / "code" / ".jp")]
    keep = [str(data / "ws"), str(home / "code")]
    grants = set(sandbox_exec.read_grants(hidden, keep))
    assert str(home / "notes.txt") in grants and str(home / ".gnupg") in grants
    assert str(data / "ws") in grants  # a writable root inside a hidden folder
    assert str(home / "code") in grants  # its .jp stays readable: it is in a writable root
    for left_out in (".ssh", ".netrc", "keys", "up"):
        assert str(home / left_out) not in grants
    assert str(data / "conversations") not in grants and str(data) not in grants
    assert "/usr" in grants and "/" not in grants
    assert sandbox_exec.read_grants([str(tmp_path / "missing")], keep) == []
