"""Cost from `[prices]`: on each `usage` event, recorded with the `chat_response`, and
totalled by `jp conversation show` (text and `-F json`), against a real `jpd --listen`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.sockets import Daemons, run_jp, socket_env

USAGE = {"input_tokens": 1_000_000, "output_tokens": 200_000}


async def test_cost_of_a_priced_model(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path, [{"text": "one", "usage": USAGE}, {"text": "two", "usage": USAGE}])
    config = Path(env["JP_CONFIG"])
    prices = '[prices."test/scripted"]\ninput = 3.0\noutput = 15.0\n'
    config.write_text(config.read_text() + prices)
    await daemons.start(env)
    streamed = run_jp(env, "query", "--new", "-F", "json", "hi")
    assert streamed.returncode == 0, streamed.stderr
    usage = [json.loads(line)["event"] for line in streamed.stdout.splitlines()]
    [event] = [e for e in usage if e["kind"] == "usage"]
    assert event["cost"] == pytest.approx(6.0)  # 1M in at 3.0 + 0.2M out at 15.0
    assert run_jp(env, "query", "again").returncode == 0
    conversation = run_jp(env, "conversation", "ls", "--ids").stdout.strip()
    shown = run_jp(env, "conversation", "show", conversation)
    assert "tokens: 2,000,000 in, 400,000 out, cost 12.0000" in shown.stdout
    as_json = json.loads(run_jp(env, "conversation", "show", conversation, "-F", "json").stdout)
    costs = [e.get("cost") for e in as_json["events"] if e["type"] == "chat_response"]
    assert costs == [pytest.approx(6.0), pytest.approx(6.0)]


async def test_no_price_no_cost(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path, [{"text": "one", "usage": USAGE}])
    await daemons.start(env)
    streamed = run_jp(env, "query", "--new", "-F", "json", "hi")
    events = [json.loads(line)["event"] for line in streamed.stdout.splitlines()]
    [event] = [e for e in events if e["kind"] == "usage"]
    assert "cost" not in event or event["cost"] is None
    conversation = run_jp(env, "conversation", "ls", "--ids").stdout.strip()
    shown = run_jp(env, "conversation", "show", conversation)
    assert "tokens: 1,000,000 in, 200,000 out" in shown.stdout and "cost" not in shown.stdout
