"""Params and result of `initialize` (protocol.md 5.1): the version, the client's
and the daemon's names and capabilities (camelCase on the wire)."""

from typing import Literal

from pydantic import Field

from jpd.protocol.base import WireModel, WireParams
from jpd.protocol.question import AnswerTypeName

PROTOCOL_VERSION = 1


class ClientInfo(WireParams):
    name: str
    version: str | None = None


class PromptCapability(WireParams):
    answer_types: list[AnswerTypeName] = []


class ClientCapabilitiesParams(WireParams):
    prompt: PromptCapability | None = None
    permission: bool = False


class InitializeParams(WireParams):
    protocol_version: Literal[1]
    client_info: ClientInfo
    capabilities: ClientCapabilitiesParams = Field(default_factory=ClientCapabilitiesParams)
    workspace_root: str | None = None
    """Absolute path of the client's workspace (for `.jp/config.toml`); optional."""
    data_dir: str | None = None
    """The data dir the client expects (absolute); refused when it is not the daemon's."""


class ServerInfo(WireModel):
    name: str = "jpd"
    version: str


class ServerCapabilities(WireModel):
    methods: list[str]
    providers: list[str]


class InitializeResult(WireModel):
    protocol_version: int = PROTOCOL_VERSION
    server_info: ServerInfo
    capabilities: ServerCapabilities
