"""Images of tool results (MCP image content) reach each provider in its own format."""

from __future__ import annotations

from jpd.conversation.events import ToolCallResponse, ToolImage, dump_event
from jpd.llm import anthropic_request, openai_request
from jpd.llm.base import (
    AssistantMessage,
    ModelRequest,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)
from jpd.llm.history import to_messages

PIXEL = ToolImage(mime_type="image/png", data="iVBORw0KGgo=")
CALL = ToolCallPart(id="c1", name="picture", arguments={})
REQUEST = ModelRequest(
    model="m",
    messages=(
        UserMessage(content="draw"),
        AssistantMessage(content="", tool_calls=(CALL,)),
        ToolResultMessage(tool_call_id="c1", content="a picture", images=(PIXEL,)),
        UserMessage(content="thanks"),
    ),
)


def test_anthropic_puts_images_in_the_tool_result() -> None:
    body = anthropic_request.build_body(REQUEST)
    [result] = [b for m in body["messages"] for b in m["content"] if b["type"] == "tool_result"]
    assert result["content"] == [
        {"type": "text", "text": "a picture"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
    ]


def test_openai_follows_the_tool_messages_with_one_user_message_of_images() -> None:
    messages = openai_request.build_body(REQUEST)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user", "user"]
    assert messages[2]["content"] == "a picture"
    assert messages[3]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
    }


def test_images_persist_and_come_back_in_history() -> None:
    plain = ToolCallResponse(id="c0", content="text only")
    assert "images" not in dump_event(plain)  # logs of image-less results keep their shape
    event = ToolCallResponse(id="c1", content="a picture", images=[PIXEL])
    assert '"images":[{"mime_type":"image/png","data":"iVBORw0KGgo="}]' in dump_event(event)
    [message] = [m for m in to_messages([event]) if isinstance(m, ToolResultMessage)]
    assert message.images == (PIXEL,)
    assert "images" not in ToolResultMessage(tool_call_id="x", content="y").model_dump()
