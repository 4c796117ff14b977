"""Gemini `generateContent` request bodies, built deterministically (as
`anthropic_request.py`: fixed key order, serialised by `request_build.encode_body`).

Gemini has two roles, `user` and `model`: tool results go back as `functionResponse`
parts of a user turn, named after the call they answer (the API matches them by name,
and by `id` where it sent one). A model turn's thought signature (the opaque token
Gemini 2.5 and 3 return with a function call, required back with it) is kept as the
assistant message's `reasoning_signature` and sent on its first function call; a
function call from elsewhere (another provider's turn) carries the documented
placeholder that skips the check.
"""

from __future__ import annotations

from typing import Any

from jpd.llm.base import (
    AssistantMessage,
    ModelRequest,
    ToolChoice,
    ToolDefinition,
    ToolResultMessage,
    UserMessage,
)

Obj = dict[str, Any]

SIGNATURE_PREFIX = "gemini:"
"""Marks a thought signature as Gemini's in `AssistantMessage.reasoning_signature`."""
SKIP_SIGNATURE = "skip_thought_signature_validator"
"""Gemini's documented stand-in for a thought signature the history does not have."""
_BUDGETS = {"low": 1024, "medium": 8192, "high": 24576}


def build_body(request: ModelRequest) -> Obj:
    """The JSON body for `POST .../models/<model>:streamGenerateContent?alt=sse`."""
    body: Obj = {"contents": _contents(request)}
    if request.system:
        body["systemInstruction"] = {"parts": [{"text": request.system}]}
    if request.tools:
        body["tools"] = [{"functionDeclarations": [_tool(tool) for tool in request.tools]}]
        body["toolConfig"] = {"functionCallingConfig": _tool_choice(request.tool_choice)}
    config: Obj = {}
    if request.max_tokens is not None:
        config["maxOutputTokens"] = request.max_tokens
    if request.temperature is not None:
        config["temperature"] = request.temperature
    if request.reasoning_effort != "off":
        budget = request.reasoning_budget or _BUDGETS[request.reasoning_effort]
        config["thinkingConfig"] = {"includeThoughts": True, "thinkingBudget": budget}
    if request.response_schema is not None:
        # `responseJsonSchema` takes JSON Schema as is (`responseSchema` an OpenAPI subset).
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = request.response_schema
    if config:
        body["generationConfig"] = config
    return body


def _tool(tool: ToolDefinition) -> Obj:
    # `parametersJsonSchema` takes JSON Schema as is; `parameters` only an OpenAPI subset.
    return {
        "name": tool.name,
        "description": tool.description,
        "parametersJsonSchema": tool.parameters,
    }


def _tool_choice(choice: ToolChoice) -> Obj:
    if choice.type == "tool":
        return {"mode": "ANY", "allowedFunctionNames": [choice.name]}
    return {"mode": {"auto": "AUTO", "none": "NONE", "any": "ANY"}[choice.type]}


def _contents(request: ModelRequest) -> list[Obj]:
    contents: list[Obj] = []
    names: dict[str, str] = {}

    def add(role: str, parts: list[Obj]) -> None:
        if not parts:
            return
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})

    for message in request.messages:
        if isinstance(message, UserMessage):
            parts: list[Obj] = [{"text": message.content}] if message.content else []
            parts += [_image(image.mime_type, image.data) for image in message.images]
            add("user", parts)
        elif isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                names[call.id] = call.name
            add("model", _model_parts(message))
        else:
            add("user", _result_parts(message, names.get(message.tool_call_id, "")))
    return contents


def _model_parts(message: AssistantMessage) -> list[Obj]:
    parts: list[Obj] = []
    if message.content:
        parts.append({"text": message.content})
    signature = message.reasoning_signature or ""
    # Another provider's reasoning state means nothing to Gemini.
    signature = signature[len(SIGNATURE_PREFIX) :] if signature.startswith(SIGNATURE_PREFIX) else ""
    for index, call in enumerate(message.tool_calls):
        part: Obj = {"functionCall": {"id": call.id, "name": call.name, "args": call.arguments}}
        if index == 0:
            part["thoughtSignature"] = signature or SKIP_SIGNATURE
        parts.append(part)
    if signature and not message.tool_calls and parts:
        parts[-1]["thoughtSignature"] = signature
    return parts


def _result_parts(message: ToolResultMessage, name: str) -> list[Obj]:
    key = "error" if message.is_error else "content"
    parts: list[Obj] = [
        {
            "functionResponse": {
                "id": message.tool_call_id,
                "name": name,
                "response": {key: message.content},
            }
        }
    ]
    parts += [_image(image.mime_type, image.data) for image in message.images]
    return parts


def _image(mime_type: str, data: str) -> Obj:
    return {"inlineData": {"mimeType": mime_type, "data": data}}
