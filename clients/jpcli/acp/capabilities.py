"""`initialize`: what the bridge declares to the editor, and what it reads of the
editor's own declaration (forms, `_meta.usage`)."""

from __future__ import annotations

from acp import PROTOCOL_VERSION
from acp.schema import (
    AgentCapabilities,
    ClientCapabilities,
    Implementation,
    InitializeResponse,
    McpCapabilities,
    PromptCapabilities,
    SessionAdditionalDirectoriesCapabilities,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionDeleteCapabilities,
    SessionListCapabilities,
    SessionResumeCapabilities,
)

from jpcli import __version__


def declares_forms(client_capabilities: ClientCapabilities | None) -> bool:
    """The editor answers questions with form elicitation."""
    elicitation = client_capabilities.elicitation if client_capabilities else None
    return elicitation is not None and elicitation.form is not None


def declares_usage(client_capabilities: ClientCapabilities | None) -> bool:
    """The editor declared `_meta.usage`: `session/prompt` answers carry `usage`."""
    meta = getattr(client_capabilities, "field_meta", None)
    return isinstance(meta, dict) and meta.get("usage") is True


def initialize_response(protocol_version: int) -> InitializeResponse:
    """The negotiated version and what the bridge does."""
    return InitializeResponse(
        protocol_version=min(protocol_version, PROTOCOL_VERSION),
        agent_capabilities=AgentCapabilities(
            load_session=True,
            # Images: the daemon refuses them, clearly, for a model without images.
            prompt_capabilities=PromptCapabilities(embedded_context=True, image=True),
            mcp_capabilities=McpCapabilities(http=True, sse=False),
            session_capabilities=SessionCapabilities(
                list=SessionListCapabilities(),
                resume=SessionResumeCapabilities(),
                close=SessionCloseCapabilities(),
                delete=SessionDeleteCapabilities(),
                additional_directories=SessionAdditionalDirectoriesCapabilities(),
            ),
        ),
        agent_info=Implementation(name="jp", title="jp (jpd)", version=__version__),
    )
