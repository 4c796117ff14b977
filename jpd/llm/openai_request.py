"""OpenAI Chat Completions request bodies, built deterministically.

Same rules as `anthropic_request.py`: fixed key order, tools and messages in
the given order, serialised by `request_build.encode_body`. OpenAI caches
prompt prefixes automatically, so stable bytes are what make it hit.

`compatible` selects the dialect of OpenAI-compatible servers (Ollama,
llama.cpp server, vLLM, OpenRouter): they take `max_tokens`, while OpenAI's
reasoning models only accept `max_completion_tokens`.
"""

from __future__ import annotations

from typing import Any

from jpd.conversation.events import ToolImage
from jpd.llm.base import (
    PDF,
    AssistantMessage,
    Message,
    ModelRequest,
    ToolChoice,
    ToolDefinition,
    ToolResultMessage,
    UserMessage,
    pictures,
)
from jpd.llm.request_build import encode_arguments
from jpd.llm.structured import SCHEMA_NAME, strict_ok

Obj = dict[str, Any]


def build_body(request: ModelRequest, *, compatible: bool = False) -> Obj:
    """The JSON body for `POST <base>/chat/completions` with `stream: true`."""
    body: Obj = {"model": request.model, "messages": _messages(request, compatible)}
    if request.tools:
        body["tools"] = [_tool(tool) for tool in request.tools]
        body["tool_choice"] = _tool_choice(request.tool_choice)
    if request.max_tokens is not None:
        body["max_tokens" if compatible else "max_completion_tokens"] = request.max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.reasoning_effort != "off":
        body["reasoning_effort"] = request.reasoning_effort
    if compatible and request.pinned_arguments is not None:
        # llama.cpp-style servers decode under this schema (a grammar): the answer comes
        # as JSON text, and neither the tools nor the messages change.
        body["response_format"] = {"type": "json_object", "schema": request.pinned_arguments}
    if request.response_schema is not None:
        body["response_format"] = (
            {"type": "json_object", "schema": request.response_schema}
            if compatible
            else {
                "type": "json_schema",
                "json_schema": {
                    "name": SCHEMA_NAME,
                    "schema": request.response_schema,
                    "strict": strict_ok(request.response_schema),
                },
            }
        )
    body["stream"] = True
    # Without this the stream carries no token counts at all.
    body["stream_options"] = {"include_usage": True}
    return body


def _tool(tool: ToolDefinition) -> Obj:
    function: Obj = {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
    }
    if tool.strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def _tool_choice(choice: ToolChoice) -> str | Obj:
    if choice.type == "tool":
        return {"type": "function", "function": {"name": choice.name}}
    return "required" if choice.type == "any" else choice.type


def _messages(request: ModelRequest, compatible: bool) -> list[Obj]:
    out: list[Obj] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    images: list[Obj] = []
    for message in request.messages:
        if images and not isinstance(message, ToolResultMessage):
            out.append(_images_message(images))
            images = []
        converted = _convert(message, compatible)
        if converted is not None:
            out.append(converted)
        if isinstance(message, ToolResultMessage):
            images += [
                {"type": "image_url", "image_url": {"url": f"data:{i.mime_type};base64,{i.data}"}}
                for i in message.images
            ]
    if images:
        out.append(_images_message(images))
    return out


def _user_part(item: ToolImage, number: int) -> Obj:
    url = f"data:{item.mime_type};base64,{item.data}"
    if item.mime_type == PDF:
        return {"type": "file", "file": {"filename": f"document{number}.pdf", "file_data": url}}
    return {"type": "image_url", "image_url": {"url": url}}


def _images_message(images: list[Obj]) -> Obj:
    """Tool messages carry text only: the images of a batch of tool results follow it
    in one user message."""
    return {
        "role": "user",
        "content": [{"type": "text", "text": "Images from the tool results:"}, *images],
    }


def _convert(message: Message, compatible: bool) -> Obj | None:
    if isinstance(message, UserMessage):
        # OpenAI takes PDFs as `file` parts; a compatible server gets the images only.
        shown = pictures(message.images) if compatible else message.images
        if not shown:
            return {"role": "user", "content": message.content}
        parts = [_user_part(i, n) for n, i in enumerate(shown, 1)]
        return {"role": "user", "content": [{"type": "text", "text": message.content}, *parts]}
    if not isinstance(message, AssistantMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if not message.content and not message.tool_calls:
        return None
    # Reasoning is not sent back: Chat Completions has no input field for it.
    # A string even beside tool calls: llama.cpp's server answers `content: null` with a
    # 500, and OpenAI, vLLM, Ollama and LM Studio all take "".
    out: Obj = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": encode_arguments(call.arguments)},
            }
            for call in message.tool_calls
        ]
    return out
