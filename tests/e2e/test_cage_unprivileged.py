"""Issue 35 end to end: a real `jpd --listen` run by an unprivileged user, a scripted
model that follows a hostile repository's instructions, and one `run_command` that
tries everything at once. It gets nothing: no call through the daemon's socket, no
changed mode, file or hook outside the cage's writable places, no process left behind.

The daemon and its client run as the victim with the system Python (the test's own
interpreter may lie under root's private home) and this tree on PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cage_victim import (
    DAEMONIZE,
    NEEDS_VICTIM,
    PATH,
    SYSTEM_PYTHON,
    Victim,
    survivors,
    victim,
)
from tests.e2e.harness import write_script
from tests.e2e.tools import tool_call

__all__ = ["victim"]  # the fixture
pytestmark = NEEDS_VICTIM

ROOT = Path(__file__).resolve().parents[2]
# The installed packages the victim's daemon imports (root's own home may be 0700).
SITE = os.pathsep.join(p for p in sys.path if p.endswith("site-packages") and "/root" not in p)

# Sends the daemon a `tool/call` of an unsandboxed command, as issue 35 item 1 did.
REENTER = """import json, socket, sys
def frame(message):
    body = json.dumps(message).encode()
    return b"Content-Length: %d\\r\\n\\r\\n" % len(body) + body
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    hello = {"protocolVersion": 1, "clientInfo": {"name": "x", "version": "1"}}
    s.sendall(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}))
    s.sendall(frame({"jsonrpc": "2.0", "id": 2, "method": "tool/call", "params": {
        "name": "run_command", "arguments": {"command": "touch " + sys.argv[2]}}}))
    print("REENTERED", s.recv(4096))
except OSError as error:
    print("refused:", error)
"""

CLIENT = """import json, socket, sys
def frame(message):
    body = json.dumps(message).encode()
    return b"Content-Length: %d\\r\\n\\r\\n" % len(body) + body
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
data = b""
def read():
    global data
    while b"\\r\\n\\r\\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise SystemExit("the daemon closed the connection")
        data += chunk
    header, data = data.split(b"\\r\\n\\r\\n", 1)
    length = int(header.split(b":")[1])
    while len(data) < length:
        data += s.recv(65536)
    message, data = json.loads(data[:length]), data[length:]
    return message
init = {"protocolVersion": 1, "clientInfo": {"name": "t", "version": "1"},
        "workspaceRoot": sys.argv[2]}
s.sendall(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
while read().get("id") != 1:
    pass
s.sendall(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
s.sendall(frame({"jsonrpc": "2.0", "id": 2, "method": "turn/start", "params": {"message": "go"}}))
results = []
while True:
    message = read()
    if message.get("method") == "turn/event":
        event = message["params"]["event"]
        if event["kind"] == "tool_result":
            results.append(event["content"])
        if event["kind"] == "turn_completed":
            break
print(json.dumps(results))
"""


def as_victim(victim: Victim) -> dict[str, object]:
    def become() -> None:
        os.setgroups([])
        os.setgid(victim.gid)
        os.setuid(victim.uid)

    return {"preexec_fn": become, "cwd": str(victim.home)}


@pytest.mark.parametrize("cage", ["namespaces", "landlock"])
def test_a_hostile_command_in_a_real_daemon_gets_nothing(victim: Victim, cage: str) -> None:
    home, ws, runtime = victim.home, victim.workspace, victim.runtime
    key, sock = home / ".ssh" / "id_ed25519", runtime / "jp" / "jpd.sock"
    pwned, token = home / "pwned", f"jpd-e2e-victim-{os.getpid()}-{cage}"
    (ws / "reenter.py").write_text(REENTER)
    (ws / "daemonize.py").write_text(DAEMONIZE)
    attack = (
        f"python3 reenter.py {sock} {pwned}; chmod 0644 {key}; chmod 0777 {runtime / 'jp'};"
        f" chmod 0777 {home}; echo pwned >> {home / '.bashrc'};"
        " printf '#!/bin/sh\\ntouch /tmp/hooked\\n' > .git/hooks/pre-commit;"
        f" kill -STOP $PPID; python3 daemonize.py {token}; echo inside > inside.txt"
    )
    script = write_script(
        home / "script.json", [tool_call("run_command", command=attack), {"text": "done"}]
    )
    config = home / "config.toml"
    config.write_text(
        '[assistant.model]\nid = "test/scripted"\n'
        f'[providers.test]\nscript = "{script}"\n'
        '[conversation.tools.run_command]\nrun = "unattended"\n'
        f'options.cage = "{cage}"\n'
    )
    for path in (script, config, ws / "reenter.py", ws / "daemonize.py"):
        os.chown(path, victim.uid, victim.gid)
    env = {
        **victim.env(),
        "JP_CONFIG": str(config),
        "JP_STATE_DIR": str(home / ".local" / "state" / "jp"),
        "JP_LOG_DIR": str(home / "logs"),
        "PYTHONPATH": f"{ROOT}:{ROOT / 'clients'}:{SITE}",
        "ANTHROPIC_API_KEY": "sk-ant-victim",
    }
    modes = {path: stat.S_IMODE(path.stat().st_mode) for path in (key, runtime / "jp", home)}
    probe = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import jpd.server, pydantic, pygls.protocol"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        **as_victim(victim),  # type: ignore[call-overload]
    )
    if probe.returncode != 0:  # e.g. this checkout lies in a folder only root can enter
        pytest.skip(f"the unprivileged user cannot import this tree: {probe.stderr[-300:]}")
    daemon = subprocess.Popen(
        [SYSTEM_PYTHON, "-m", "jpd", "--listen"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        **as_victim(victim),  # type: ignore[call-overload]
    )
    try:
        deadline = time.monotonic() + 60
        while not sock.exists():
            assert daemon.poll() is None, "jpd --listen exited at start"
            assert time.monotonic() < deadline, "jpd --listen did not listen in time"
            time.sleep(0.02)
        client = subprocess.run(
            [SYSTEM_PYTHON, "-c", CLIENT, str(sock), str(ws)],
            env={"PATH": PATH},
            capture_output=True,
            text=True,
            timeout=40,
            check=False,
            **as_victim(victim),  # type: ignore[call-overload]
        )
    finally:
        daemon.terminate()
        _, errors = daemon.communicate(timeout=60)
    assert client.returncode == 0, (client.stderr, errors.decode(errors="replace")[-3000:])
    [result] = json.loads(client.stdout.strip().splitlines()[-1])
    assert "inside" in (ws / "inside.txt").read_text(), result
    assert "REENTERED" not in result and "refused:" in result
    assert not pwned.exists()
    assert {path: stat.S_IMODE(path.stat().st_mode) for path in modes} == modes
    assert (home / ".bashrc").read_text() == "# mine\n"
    if cage == "namespaces":  # the landlock cage leaves .git writable (README)
        assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert "started" in result and survivors(token) == []
    assert b"Traceback" not in errors
