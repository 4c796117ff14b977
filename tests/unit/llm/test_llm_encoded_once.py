"""Tool schemas serialised once per config (`request_build.encoded_once`): the bytes
sent are the same as serialising everything each time."""

from __future__ import annotations

from jpd.llm.anthropic import AnthropicProvider
from jpd.llm.anthropic_request import build_body as anthropic_body
from jpd.llm.base import ModelRequest, ToolChoiceAuto, ToolDefinition, UserMessage
from jpd.llm.openai import OpenAIProvider
from jpd.llm.openai_request import build_body as openai_body
from jpd.llm.request_build import Encoded, encode_body, encoded_once

TOOLS = (
    ToolDefinition(
        name="zeta",
        description='Ünïcode "quoted"',
        parameters={"type": "object", "properties": {"b": {"type": "string"}}},
    ),
    ToolDefinition(name="alpha", description="", parameters={"type": "object"}, strict=True),
)


def request(tools: tuple[ToolDefinition, ...] = TOOLS, text: str = "hi") -> ModelRequest:
    return ModelRequest(
        model="m",
        system="You help.",
        messages=(UserMessage(content=text),),
        tools=tools,
        tool_choice=ToolChoiceAuto(),
    )


def test_an_encoded_member_gives_the_bytes_of_the_whole() -> None:
    body = {"model": "m", "tools": [{"a": "é", "b": [1, None]}], "stream": True}
    spliced = {**body, "tools": Encoded('[{"a":"é","b":[1,null]}]')}
    assert encode_body(spliced) == encode_body(body)


def test_the_same_objects_are_serialised_once() -> None:
    calls: list[int] = []

    def value() -> list[str]:
        calls.append(1)
        return [tool.name for tool in TOOLS]

    first = encoded_once("test", TOOLS, value)
    assert encoded_once("test", tuple(TOOLS), value) is first  # a new tuple, same tools
    assert calls == [1] and first == '["zeta","alpha"]'
    assert encoded_once("other", TOOLS, lambda: "x") == '"x"'  # each kind its own
    copies = tuple(tool.model_copy() for tool in TOOLS)  # equal, but other objects
    encoded_once("test", copies, value)
    assert calls == [1, 1]


def test_anthropic_and_openai_bodies_are_byte_identical_to_a_full_encoding() -> None:
    anthropic = AnthropicProvider(env={"ANTHROPIC_API_KEY": "k"})
    openai = OpenAIProvider(env={"OPENAI_API_KEY": "k"})
    for text in ("one", "two"):  # the second reuses the tools' encoding
        sent = request(text=text)
        assert anthropic.call(sent, "http://x", ()).body == encode_body(anthropic_body(sent))
        assert openai.call(sent, "http://x", ()).body == encode_body(openai_body(sent))
    assert anthropic.call(request(()), "http://x", ()).body == encode_body(
        anthropic_body(request(()))
    )
