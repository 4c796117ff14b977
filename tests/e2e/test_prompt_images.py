"""Images in user messages (`turn/start` `images`): they reach Anthropic and OpenAI in
their wire formats, are kept as files in the conversation's folder (the event names the
file, the log holds no base64), are sent again from those files by a later turn of a
new daemon, and a model without images refuses them clearly."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from tests.e2e.conftest import StartJpd
from tests.e2e.hosted import CLAUDE, OPENAI_CHAT, OPENAI_KEY, anthropic_env, body
from tests.e2e.test_turns import disk_events
from tests.fixtures.fake_llm_server import FakeLLMServer
from tests.fixtures.llm_wire import a_text_answer, o_text_answer, stream_reply

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16 + b"pixel"
B64 = base64.b64encode(PNG).decode()


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


async def test_anthropic_gets_the_image_and_the_log_names_its_file(
    jpd_factory: StartJpd, home: Path, fake: FakeLLMServer
) -> None:
    fake.push(stream_reply(*a_text_answer("A pixel.")))
    fake.push(stream_reply(*a_text_answer("Still a pixel.")))
    daemon = await jpd_factory(model=CLAUDE, env=anthropic_env(fake))
    await daemon.initialize()
    started, _ = await daemon.run_turn(
        "What is this?", images=[{"mimeType": "image/png", "data": B64}]
    )
    cid = started["conversationId"]
    sent = body(fake.requests[0])["messages"][-1]
    assert sent["role"] == "user"
    assert sent["content"][0] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": B64},
    }
    assert sent["content"][-1]["text"] == "What is this?"

    request = next(e for e in disk_events(home, cid) if e["type"] == "chat_request")
    (ref,) = request["images"]
    assert ref["mime_type"] == "image/png" and ref["file"].startswith("images/")
    folder = home / "data" / "conversations" / cid
    assert (folder / ref["file"]).read_bytes() == PNG
    assert B64 not in (folder / "events.jsonl").read_text()
    await daemon.stop()

    # A new daemon reads the image from its file for the next turn's history.
    again = await jpd_factory(model=CLAUDE, env=anthropic_env(fake))
    await again.initialize()
    await again.run_turn("And now?", conversationId=cid)
    history = body(fake.requests[1])["messages"]
    assert history[0]["content"][0]["source"]["data"] == B64


async def test_openai_gets_the_image_as_a_data_url(
    jpd_factory: StartJpd, fake: FakeLLMServer
) -> None:
    fake.push(stream_reply(*o_text_answer("A pixel.")))
    env = {"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": fake.base_url + "/v1"}
    daemon = await jpd_factory(model="openai/gpt-x", env=env, config=OPENAI_CHAT)
    await daemon.initialize()
    await daemon.run_turn("What is this?", images=[{"mimeType": "image/jpeg", "data": B64}])
    sent = body(fake.requests[0])["messages"][-1]
    assert sent["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{B64}"}},
    ]


async def test_a_model_without_images_and_bad_images_are_refused(
    jpd_factory: StartJpd, home: Path
) -> None:
    daemon = await jpd_factory()
    await daemon.initialize()
    cases = [
        ([{"mimeType": "image/png", "data": B64}], "the model test/scripted takes no images"),
        ([{"mimeType": "image/tiff", "data": B64}], "mimeType"),
    ]
    for images, problem in cases:
        with pytest.raises(JsonRpcException) as refused:
            await daemon.request("turn/start", {"message": "look", "images": images})
        assert refused.value.code == -32602 and problem in str(refused.value)
    assert not list((home / "data").glob("conversations/c-*"))
    # The daemon goes on.
    started, _ = await daemon.run_turn("text only")
    assert started["conversationId"]
    assert json.dumps(started)
