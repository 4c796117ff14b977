"""OpenAI Responses API request bodies (`POST /v1/responses`), built deterministically
(as the other builders: fixed key order, serialised by `request_build.encode_body`).

Nothing is stored at OpenAI (`store: false`): every request carries the whole history
as input items. A reasoning model's reasoning goes back as its `reasoning` items, each
with the `encrypted_content` the API returned (asked for with `include`); jpd keeps
them as the assistant message's `reasoning_signature` (`openai:` and the items as
JSON), so the model continues from its own reasoning across tool calls and turns.
"""

from __future__ import annotations

import json
from typing import Any

from jpd.llm.base import (
    PDF,
    AssistantMessage,
    ModelRequest,
    ToolChoice,
    ToolResultMessage,
    UserMessage,
)
from jpd.llm.request_build import encode_arguments

Obj = dict[str, Any]
SIGNATURE_PREFIX = "openai:"
"""Marks `AssistantMessage.reasoning_signature` as OpenAI reasoning items (JSON)."""


def build_body(request: ModelRequest) -> Obj:
    """The JSON body for `POST <base>/responses` with `stream: true`."""
    body: Obj = {"model": request.model}
    if request.system:
        body["instructions"] = request.system
    body["input"] = _input(request)
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
                "strict": tool.strict,
            }
            for tool in request.tools
        ]
        body["tool_choice"] = _tool_choice(request.tool_choice)
    if request.max_tokens is not None:
        body["max_output_tokens"] = request.max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.response_schema is not None:
        from jpd.llm.structured import openai_format

        body["text"] = {"format": openai_format(request.response_schema)}
    if request.reasoning_effort != "off":
        body["reasoning"] = {"effort": request.reasoning_effort, "summary": "auto"}
        body["include"] = ["reasoning.encrypted_content"]
    body["store"] = False
    body["stream"] = True
    return body


def _tool_choice(choice: ToolChoice) -> str | Obj:
    if choice.type == "tool":
        return {"type": "function", "name": choice.name}
    return "required" if choice.type == "any" else choice.type


def _input(request: ModelRequest) -> list[Obj]:
    items: list[Obj] = []
    for message in request.messages:
        if isinstance(message, UserMessage):
            items.append(_user(message))
        elif isinstance(message, AssistantMessage):
            items += _assistant(message)
        else:
            items.append(_result(message))
    return items


def _image(mime_type: str, data: str) -> Obj:
    return {"type": "input_image", "image_url": f"data:{mime_type};base64,{data}", "detail": "auto"}


def _user(message: UserMessage) -> Obj:
    if not message.images:
        return {"role": "user", "content": message.content}
    content = [{"type": "input_text", "text": message.content}]
    for number, item in enumerate(message.images, 1):
        if item.mime_type == PDF:
            content.append(
                {
                    "type": "input_file",
                    "filename": f"document{number}.pdf",
                    "file_data": f"data:{PDF};base64,{item.data}",
                }
            )
        else:
            content.append(_image(item.mime_type, item.data))
    return {"role": "user", "content": content}


def _assistant(message: AssistantMessage) -> list[Obj]:
    items = reasoning_items(message.reasoning_signature)
    if message.content:
        items.append({"role": "assistant", "content": message.content})
    items += [
        {
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": encode_arguments(call.arguments),
        }
        for call in message.tool_calls
    ]
    return items


def reasoning_items(signature: str | None) -> list[Obj]:
    """The reasoning items kept in a signature (none for another provider's)."""
    if not signature or not signature.startswith(SIGNATURE_PREFIX):
        return []
    try:
        items = json.loads(signature[len(SIGNATURE_PREFIX) :])
    except ValueError:
        return []
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def _result(message: ToolResultMessage) -> Obj:
    output: str | list[Obj] = message.content
    if message.images:
        output = [{"type": "input_text", "text": message.content}]
        output += [_image(image.mime_type, image.data) for image in message.images]
    return {"type": "function_call_output", "call_id": message.tool_call_id, "output": output}
