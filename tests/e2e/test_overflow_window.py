"""An overflow sized by the refusal, end to end (protocol.md 12.5): a fake Anthropic
server whose real window (5,607 tokens) is far smaller than the configured 200k refuses
one request; the daemon compacts against the stated window, retries once, says so in
its `context_compacted` event and reports usage against that window."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import StartJpd
from tests.e2e.hosted import CLAUDE, anthropic_env, body, of_kind, texts
from tests.e2e.test_turns import disk_events
from tests.fixtures.fake_llm_server import FakeLLMServer
from tests.fixtures.llm_wire import a_error_body, a_text_answer, json_reply, stream_reply

REFUSAL = "prompt is too long: 5608 tokens > 5607 maximum"


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


async def test_one_refusal_one_compaction_one_retry(
    jpd_factory: StartJpd, home: Path, fake: FakeLLMServer
) -> None:
    fake.push(
        stream_reply(*a_text_answer("Noted.")),
        json_reply(400, a_error_body("invalid_request_error", REFUSAL)),
        stream_reply(*a_text_answer("Goal: read the long notes. Constraints: none.")),
        stream_reply(*a_text_answer("Here is the answer.")),
    )
    daemon = await jpd_factory(model=CLAUDE, env=anthropic_env(fake))
    await daemon.initialize()
    first, _ = await daemon.run_turn("notes: " + "lorem ipsum " * 1500)
    cid = first["conversationId"]
    _, events = await daemon.run_turn("What do the notes say?", conversationId=cid)

    assert events[-1]["event"]["stopReason"] == "end_turn"
    assert "".join(texts(events)) == "Here is the answer."
    [compacted] = of_kind(events, "context_compacted")
    assert compacted["trigger"] == "overflow" and compacted["method"] == "summary"
    assert compacted["window"] == 5607
    assert compacted["tokensAfter"] < compacted["tokensBefore"]
    [usage] = of_kind(events, "usage")
    assert usage["context"]["window"] == 5607

    assert len(fake.requests) == 4  # the first turn, the refused one, the summary, the retry
    refused, summary, retry = (body(r) for r in fake.requests[1:])
    assert "Stop here: do not answer" in str(summary["messages"][-1])
    assert len(fake.requests[3].body) < len(fake.requests[1].body) // 2
    assert "Goal: read the long notes." in str(retry["messages"][0])
    assert refused["messages"][-1] == retry["messages"][-1]

    [stored] = [e for e in disk_events(home, cid) if e["type"] == "context_compacted"]
    assert stored["window"] == {"model": CLAUDE, "tokens": 5607}
