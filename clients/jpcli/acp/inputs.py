"""What an editor sends with a session or a prompt, as the daemon takes it: the editor's
MCP servers as `turn/start` config, the prompt's content blocks as the message, and the
session's workspace and additional directories as absolute paths."""

from __future__ import annotations

import os
from typing import Any

from acp import RequestError
from acp.schema import (
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    McpServerHttp,
    McpServerStdio,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from jpcli.rpc import INVALID_PARAMS


def mcp_config(servers: list[Any] | None) -> dict[str, Any]:
    """The editor's MCP servers as `turn/start` config (protocol.md 9.6): each turn of
    the session offers their tools; the daemon keeps one server process per settings."""
    configured: dict[str, Any] = {}
    for server in servers or []:
        if isinstance(server, McpServerStdio):
            configured[server.name] = {
                "command": [server.command, *server.args],
                "env": {variable.name: variable.value for variable in server.env},
            }
        elif isinstance(server, McpServerHttp):
            configured[server.name] = {
                "url": server.url,
                "headers": {header.name: header.value for header in server.headers},
            }
        else:
            kind = getattr(server, "type", type(server).__name__)
            raise RequestError(
                INVALID_PARAMS, f"MCP server {server.name!r}: {kind} is not supported"
            )
    return {"mcp": {"servers": configured}} if configured else {}


def prompt_text(blocks: list[Any]) -> str:
    """The user message for the daemon: text blocks, embedded resources (the files an
    editor attaches) each under a header naming its URI, and links to resources."""
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, EmbeddedResourceContentBlock):
            resource = block.resource
            if not isinstance(resource, TextResourceContents):
                raise RequestError(INVALID_PARAMS, "binary embedded resources are not supported")
            parts.append(f"Context from {resource.uri}:\n```\n{resource.text}\n```")
        elif isinstance(block, ResourceContentBlock):
            parts.append(f"[{block.name}]({block.uri})")
        elif isinstance(block, ImageContentBlock):
            continue  # sent as `images` (prompt_images)
        else:
            raise RequestError(INVALID_PARAMS, f"{block.type} content is not supported")
    text = "\n\n".join(part for part in parts if part)
    if not text.strip() and any(isinstance(block, ImageContentBlock) for block in blocks):
        text = "(image)"  # an image alone is a message too
    if not text.strip():
        raise RequestError(INVALID_PARAMS, "the prompt is empty")
    return text


def prompt_images(blocks: list[Any]) -> list[dict[str, str]]:
    """The prompt's image blocks as `turn/start` `images` (the daemon checks the type
    and refuses them, clearly, when the model takes no images)."""
    return [
        {"mimeType": block.mime_type, "data": block.data}
        for block in blocks
        if isinstance(block, ImageContentBlock)
    ]


def absolute_path(cwd: str) -> str:
    """A session's `cwd` (or additional directory), normalized: absolute, else -32602."""
    if not os.path.isabs(cwd):
        raise RequestError(INVALID_PARAMS, f"cwd must be an absolute path, got {cwd!r}")
    return os.path.normpath(cwd)


def additional_roots(kwargs: dict[str, Any]) -> list[str]:
    """A session request's `additionalDirectories`: absolute, else -32602."""
    return [absolute_path(path) for path in kwargs.get("additional_directories") or []]
