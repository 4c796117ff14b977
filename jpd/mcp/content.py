"""An MCP `CallToolResult` as the text the model reads (protocol.md section 9.6).

Text blocks are kept as they are; an image or audio block becomes a one-line note
(tool results are text for every provider here); an embedded text resource is quoted
with its URI, a binary one and a resource link are named. Structured content is kept:
appended as JSON unless a text block already carries exactly that JSON.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from mcp import types

from jpd.mcp.model import McpResult


def _size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def render_block(block: Any) -> str:
    """One content block as text."""
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent):
        return f"[image: {block.mime_type}, {_size(block.data)} bytes]"
    if isinstance(block, types.AudioContent):
        return f"[audio: {block.mime_type}, {_size(block.data)} bytes]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return f"[resource {resource.uri}]\n{resource.text}"
        mime = getattr(resource, "mime_type", None) or "binary"
        return f"[resource {resource.uri}: {mime}, {_size(getattr(resource, 'blob', ''))} bytes]"
    if isinstance(block, types.ResourceLink):
        return f"[resource link {block.uri}" + (f": {block.name}]" if block.name else "]")
    return f"[{getattr(block, 'type', 'unknown')} content]"


def _same_json(text: str, value: Any) -> bool:
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False


def render_result(result: Any) -> McpResult:
    """The model's view of a `tools/call` result (`isError` makes it a tool error)."""
    if not isinstance(result, types.CallToolResult):
        return McpResult(f"unexpected result type {type(result).__name__}", True)
    parts = [render_block(block) for block in result.content]
    structured = result.structured_content
    if structured is not None:
        texts = [b.text for b in result.content if isinstance(b, types.TextContent)]
        wrapped = structured.get("result") if set(structured) == {"result"} else None
        carried = any(_same_json(t, structured) or t == wrapped for t in texts)
        if not carried:
            parts.append(json.dumps(structured, ensure_ascii=False, sort_keys=True))
    images = tuple(
        (block.mime_type, block.data)
        for block in result.content
        if isinstance(block, types.ImageContent)
    )
    return McpResult("\n".join(parts), bool(result.is_error), structured, images)
