"""The tools offered in each turn follow the turn's toggles and the config as it is now,
also while an unchanged config (and the tools built for it) is reused between turns.

A real daemon core in this process with the scripted model, which records each request.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

import jpd.config.cache as cache_module
from jpd.core.daemon import Daemon
from jpd.protocol.turn_requests import ToolToggle
from jpd.settings import Settings
from tests.unit.fakes import FakeLink

CONFIG = """[assistant.model]
id = "test/scripted"
[providers.test]
script = "{script}"
record = "{record}"
"""


async def test_tools_follow_toggles_and_config_edits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_module, "RECENT_NS", 0)  # reuse files just written, at once
    script, record = tmp_path / "script.json", tmp_path / "requests.jsonl"
    script.write_text(json.dumps({"responses": [{"text": "ok"}] * 4}))
    config = tmp_path / "config.toml"
    config.write_text(CONFIG.format(script=script, record=record))
    settings = Settings(data_dir=tmp_path / "data", env={"JP_CONFIG": str(config)})
    off = [ToolToggle(enable=False, name="describe_tools")]
    async with anyio.create_task_group() as tg:
        daemon = Daemon(settings, tg)
        client = FakeLink(1)
        daemon.connected(client)
        for toggles in (off, None, None):
            info = await daemon.start_turn(client, "hi", toggles=toggles)
            assert await daemon.wait_turn(info.turn_id) == "end_turn"
        with config.open("a") as f:
            f.write('[conversation.tools.deploy]\ncommand = "true"\n')
        info = await daemon.start_turn(client, "hi")
        assert await daemon.wait_turn(info.turn_id) == "end_turn"
        await daemon.aclose()
        tg.cancel_scope.cancel()

    offered = [
        [t["name"] for t in json.loads(line)["tools"]] for line in record.read_text().splitlines()
    ]
    assert "describe_tools" not in offered[0]
    assert "describe_tools" in offered[1]
    assert offered[2] == offered[1]
    assert offered[3] == sorted([*offered[1], "deploy"], key=lambda n: (n == "answer_inquiry", n))
