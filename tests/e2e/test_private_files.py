"""Private by default (protocol.md section 13, "Permissions"): 0700 dirs, 0600 files."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

from tests.e2e.sockets import Daemons, SocketClient, socket_env


def modes(root: Path) -> dict[str, int]:
    """Mode of `root` and of everything under it, by path relative to `root`."""
    found = {".": stat.S_IMODE(os.stat(root).st_mode)}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory) / name
            found[str(path.relative_to(root))] = stat.S_IMODE(os.lstat(path).st_mode)
    return found


async def test_everything_the_daemon_writes_is_private(tmp_path: Path, daemons: Daemons) -> None:
    os.umask(0o022)  # the user's usual umask: the daemon narrows it itself
    env = socket_env(tmp_path)
    data = tmp_path / "data"
    data.rmdir()
    old = tmp_path / "old-data"
    (old / "conversations").mkdir(parents=True, mode=0o755)
    os.chmod(old, 0o755)
    env["JP_DATA_DIR"] = str(data)
    daemon = await daemons.start(env)
    client = await SocketClient.connect(daemon.socket)
    await client.initialize()
    turn = await client.request("turn/start", {"message": "hi"})
    await client.wait_event(turn["turnId"], "turn_completed")
    await client.close()
    # metadata.json is written once the turn has ended, after turn_completed.
    conversation = data / "conversations" / turn["conversationId"]
    for _ in range(500):
        if (conversation / "metadata.json").exists():
            break
        await asyncio.sleep(0.01)

    written = {
        "data": modes(data),
        "logs": modes(tmp_path / "logs"),
        "run": modes(daemon.socket.parent),
    }
    assert any(name.endswith("events.jsonl") for name in written["data"])
    assert any(name.endswith("metadata.json") for name in written["data"])
    assert "jpd.log" in written["logs"] and "jpd.pid" in written["run"]
    for where, found in written.items():
        for name, mode in found.items():
            if name == "stderr.txt":
                continue  # the test harness writes it
            assert mode & 0o077 == 0, f"{where}/{name} has mode {mode:o}"
    assert await daemon.stop() == 0

    # A data dir left wider by an earlier run is narrowed at start.
    env["JP_DATA_DIR"] = str(old)
    daemon = await daemons.start(env)
    assert stat.S_IMODE(os.stat(old).st_mode) == 0o700
    assert await daemon.stop() == 0
