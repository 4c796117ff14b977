"""The peer rule's logic (jpd/tools/peer_rule.py) over described process trees, and
the environment rule for peers it cannot vouch for (jpd/core/request_env.py)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from jpd.core.request_env import PATH_SELECTORS, request_env
from jpd.protocol.environment import ClientEnvironment
from jpd.tools.peer_rule import LinuxProc, Peer, ProcStat, judge

DAEMON, UID = 100, 1000


class Table:
    """Processes described by the test: pid -> (ppid, pgid, sid, start), namespaces."""

    def __init__(self) -> None:
        self.procs: dict[int, ProcStat] = {}
        self.ns: dict[tuple[int, str], int] = {}

    def add(self, pid: int, ppid: int, *, pgid: int = 0, sid: int = 0, start: int = 1) -> None:
        self.procs[pid] = ProcStat(pid, ppid, pgid or pid, sid or pid, start)
        self.ns[(pid, "net")], self.ns[(pid, "pid")] = 1, 2

    def stat(self, pid: int) -> ProcStat | None:
        return self.procs.get(pid)

    def namespace(self, pid: int, name: str) -> int | None:
        return self.ns.get((pid, name))


def world() -> Table:
    """init(1) -> shell(10) -> jp(11); init -> daemon(100) -> launcher(200) -> tool(201)."""
    table = Table()
    table.add(1, 0)
    table.add(10, 1)
    table.add(11, 10, pgid=11, sid=10)
    table.add(DAEMON, 1)
    table.add(200, DAEMON, start=50)
    table.add(201, 200, pgid=200, sid=200, start=51)
    return table


def run(table: Table, pid: int, uid: int = UID, tools: dict[int, int] | None = None) -> str | None:
    verdict = judge(
        Peer(pid, uid),
        daemon_pid=DAEMON,
        daemon_uid=UID,
        tools={200: 50} if tools is None else tools,
        proc=table,
    )
    assert verdict.verified == (verdict.refusal is None)
    return verdict.refusal


def test_the_users_client_is_served() -> None:
    assert run(world(), 11) is None


def test_another_uid_is_refused() -> None:
    assert "runs as uid 0" in (run(world(), 11, uid=0) or "")


def test_a_peer_the_daemon_cannot_see_is_refused() -> None:
    assert "PID namespace" in (run(world(), 0) or "")


def test_another_network_or_pid_namespace_is_refused() -> None:
    for name in ("net", "pid"):
        table = world()
        table.ns[(11, name)] = 99
        assert f"another {name} namespace" in (run(table, 11) or "")


def test_unreadable_namespace_is_refused() -> None:
    table = world()
    del table.ns[(11, "net")]  # e.g. a non-dumpable process hiding from the check
    assert "cannot be read" in (run(table, 11) or "")


def test_a_tool_and_its_descendants_are_refused() -> None:
    table = world()
    table.add(202, 201, pgid=200, sid=200)
    for pid in (200, 201, 202):
        assert run(table, pid) is not None
    # Also with no record of tools at all: the chain reaches the daemon.
    assert "started by the daemon" in (run(table, 202, tools={}) or "")


def test_a_leftover_in_the_tools_session_is_refused_after_its_launcher_ended() -> None:
    table = world()
    del table.procs[200], table.procs[201]
    table.add(300, 1, pgid=300, sid=200)  # reparented to init, own group, tool's session
    assert "tool process" in (run(table, 300) or "")


def test_a_reused_session_number_is_not_a_tool() -> None:
    """The launcher's pid was reused by a new login shell (another start time), which
    leads its own session: its processes are the user's."""
    table = world()
    del table.procs[200], table.procs[201]
    table.add(200, 1, start=900)
    table.add(301, 200, pgid=301, sid=200)
    assert run(table, 301) is None


def test_a_reused_pid_is_not_a_tool() -> None:
    table = world()
    del table.procs[201]
    table.procs[200] = ProcStat(200, 10, 200, 10, start=900)  # a new process, same pid
    assert run(table, 200) is None


def test_a_chain_that_loops_ends() -> None:
    table = world()
    table.add(500, 501)
    table.add(501, 500)
    assert run(table, 500) is None


def test_the_daemon_itself_is_served() -> None:
    assert run(world(), DAEMON) is None


def test_linux_proc_reads_this_process() -> None:
    proc = LinuxProc()
    assert proc.available()
    me = proc.stat(os.getpid())
    assert me is not None and me.ppid == os.getppid() and me.sid == os.getsid(0)
    verdict = judge(
        Peer(os.getpid(), os.getuid()),
        daemon_pid=os.getppid(),
        daemon_uid=os.getuid(),
        tools={},
        proc=proc,
    )
    assert verdict.refusal is not None and "started by the daemon" in verdict.refusal


def test_an_unverified_peer_cannot_select_config_or_state() -> None:
    daemon_env = {"JP_CONFIG": "/home/u/.config/jp/config.toml", "HOME": "/home/u"}
    sent = {
        "JP_CONFIG": "/tmp/evil.toml",
        "JP_STATE_DIR": "/tmp/evil-state",
        "XDG_STATE_HOME": "/tmp/x",
        "ANTHROPIC_API_KEY": "k",
        "HOME": "/home/u",
    }
    environment = ClientEnvironment(cwd="/w", env=sent)
    unverified = request_env(environment, None, daemon_env, peer_verified=False)
    assert unverified.env["JP_CONFIG"] == "/home/u/.config/jp/config.toml"
    assert "JP_STATE_DIR" not in unverified.env and "XDG_STATE_HOME" not in unverified.env
    assert unverified.env["ANTHROPIC_API_KEY"] == "k"  # the rest is the client's
    assert unverified.workspace == Path("/w")
    verified = request_env(environment, None, daemon_env, peer_verified=True)
    assert verified.env == sent
    assert {"JP_CONFIG", "JP_STATE_DIR", "XDG_STATE_HOME"} <= set(PATH_SELECTORS)


def test_a_peer_that_ended_before_the_check_is_refused(tmp_path: Path) -> None:
    """Its `/proc` entry is gone (or, its number reused, is another process's)."""
    from jpd.rpc.peer import check_peer

    path = str(tmp_path / "s.sock")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        server.listen()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(path)
            os._exit(0)
        accepted, _ = server.accept()
        os.waitpid(pid, 0)
        with accepted:
            verdict = check_peer(accepted, {})
        assert verdict.refusal is not None and not verdict.verified
    with socket.socket(socket.AF_UNIX) as server, socket.socket(socket.AF_UNIX) as me:
        os.unlink(path)
        server.bind(path)
        server.listen()
        me.connect(path)
        accepted, _ = server.accept()
        with accepted:
            assert check_peer(accepted, {}).refusal is None  # this very process
