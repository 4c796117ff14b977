"""What is on disk when a turn's `turn_completed` is sent (protocol.md 7.2 and 12): the
turn's events, `turn_end` last, fsynced, and for a new conversation its directory
entries fsynced too; `metadata.json`, a cache and no part of that, is written only after.

A real daemon core and store in this process, with the scripted model; `os.fsync` and
the writes of metadata.json are watched to put the disk work on one timeline with what
clients are sent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from jpd.conversation.jsonl import log_files
from jpd.core.daemon import Daemon
from jpd.protocol.client_port import Notification
from jpd.settings import Settings
from tests.unit.fakes import FakeLink


class Timeline:
    """Disk work and notifications sent, in the order they happened."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entries: list[str] = []
        real_fsync, real_write_record = os.fsync, log_files.write_record

        def fsync(fd: int) -> None:
            real_fsync(fd)
            path = Path(os.readlink(f"/proc/self/fd/{fd}"))
            if path.is_dir():
                self.entries.append(f"fsync dir {path.name}")
            elif path.name == "events.jsonl":
                last = json.loads(path.read_bytes().splitlines()[-1])
                self.entries.append(f"fsync log ending with {last['type']}")

        def write_record(path: Path, record: Any) -> bool:
            written = real_write_record(path, record)
            self.entries.append(f"{path.name} written")
            return written

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(log_files, "write_record", write_record)


class Client(FakeLink):
    def __init__(self, timeline: Timeline) -> None:
        super().__init__(1)
        self._timeline = timeline

    def send(self, notification: Notification) -> None:
        super().send(notification)
        self._timeline.entries.append(f"sent {notification.wire['event']['kind']}")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
async def test_turn_completed_follows_durable_events_and_precedes_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": [{"text": "Hello", "delay_ms": 50}]}))
    config = tmp_path / "config.toml"
    config.write_text(
        f'[assistant.model]\nid = "test/scripted"\n[providers.test]\nscript = "{script}"\n'
    )
    settings = Settings(data_dir=tmp_path / "data", env={"JP_CONFIG": str(config)})
    timeline = Timeline(monkeypatch)
    async with anyio.create_task_group() as tg:
        daemon = Daemon(settings, tg)
        client = Client(timeline)
        daemon.connected(client)
        info = await daemon.start_turn(client, "Hi")
        assert await daemon.wait_turn(info.turn_id) == "end_turn"
        await daemon.aclose()
        tg.cancel_scope.cancel()

    entries = timeline.entries
    sent = entries.index("sent turn_completed")
    before, after = entries[:sent], entries[sent:]
    assert entries.index("sent turn_started") < sent
    # The conversation's directory and its entry in conversations/ are durable...
    assert f"fsync dir {info.conversation_id}" in before
    assert "fsync dir conversations" in before
    # ... and so is every event, turn_end last, before the client learns the turn ended.
    assert [e for e in before if e.startswith("fsync log")][-1] == "fsync log ending with turn_end"
    assert "metadata.json written" not in before
    assert "metadata.json written" in after
    record = json.loads(
        (settings.data_dir / "conversations" / info.conversation_id / "metadata.json").read_text()
    )
    assert (record["title"], record["event_count"]) == ("Hi", 4)
