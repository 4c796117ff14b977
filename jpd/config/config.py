"""The root `Config` model and the lookups others make on it."""

from typing import Annotated

from pydantic import AfterValidator, Field, ValidationError

from jpd.config.errors import from_validation_error
from jpd.config.mcp import McpConfig
from jpd.config.merge import merge_models
from jpd.config.models import (
    AssistantConfig,
    ConfigModel,
    ConfigPath,
    DaemonConfig,
    ModelId,
    PartialAssistantConfig,
    ProvidersConfig,
)
from jpd.config.prices import Price
from jpd.config.tools import ToolConfig

ALL_TOOLS = "*"
"""The `conversation.tools` key whose settings every tool inherits."""


def merge_tool_config(base: ToolConfig, over: ToolConfig) -> ToolConfig:
    """Lay `over` on `base` field by field; tables (`questions`, ...) key by key."""
    return merge_models(base, over)


class InquiryConfig(ConfigModel):
    assistant: PartialAssistantConfig | None = None
    """Assistant overrides for LLM inquiries (protocol.md 10.4)."""


class ContextConfig(ConfigModel):
    """`conversation.context`: when and how a conversation is compacted (protocol.md 12.5)."""

    compact: bool = True
    """false: never compact automatically; a request over the window is an error."""
    compact_at: Annotated[float, Field(gt=0.0, le=1.0)] = 0.8
    """Compact when a request would fill this fraction of the usable window."""
    model: ModelId | None = None
    """The model that writes summaries (default: the inquiry assistant's)."""


class ProtectedPathsConfig(ConfigModel):
    """`conversation.protected_paths`: files the workspace tools write only when the user
    allows that very write, in every permission mode (jpd/tools/protected.py)."""

    names: list[str] = Field(default_factory=lambda: [".git", ".jp", ".vscode", ".idea"])
    """A path with a component named so (at any depth) is protected."""
    allow: list[str] = []
    """Globs of paths relative to their root (`.vscode/settings.json`) written as any file."""


class TitleGenerateConfig(ConfigModel):
    """`conversation.title.generate` (JP's keys): a model names a new conversation."""

    auto: bool = True
    """After a new conversation's first turn, unless it has a title."""
    model: ModelId | None = None
    """The (cheap) model that writes titles; unset: none is written (a conversation
    lists by its first message). Never implied: a title costs a request of its own."""


class TitleConfig(ConfigModel):
    generate: TitleGenerateConfig = TitleGenerateConfig()


class ConversationConfig(ConfigModel):
    tools: dict[str, ToolConfig] = Field(default_factory=dict)
    protected_paths: ProtectedPathsConfig = ProtectedPathsConfig()
    title: TitleConfig = TitleConfig()
    inquiry: InquiryConfig = InquiryConfig()
    context: ContextConfig = ContextConfig()


def _check_alias(name: str) -> str:
    if not name or "/" in name:
        raise ValueError(f"an alias is a name without '/', got {name!r}")
    return name


AliasName = Annotated[str, AfterValidator(_check_alias)]


class Config(ConfigModel):
    """The effective configuration: every key has a default."""

    assistant: AssistantConfig = AssistantConfig()
    providers: ProvidersConfig = ProvidersConfig()
    conversation: ConversationConfig = ConversationConfig()
    daemon: DaemonConfig = DaemonConfig()
    mcp: McpConfig = McpConfig()
    aliases: dict[AliasName, ModelId] = Field(default_factory=dict)
    """`[aliases] fast = "anthropic/claude-haiku-4-5"`: short names for `turn/start` `model`."""
    config_load_paths: list[ConfigPath] = []
    """More folders `--cfg NAME` looks in (jpd/config/named.py)."""
    prices: dict[ModelId, Price] = Field(default_factory=dict)
    """`[prices."anthropic/claude-sonnet-4-5"] input = 3.0, output = 15.0`: per million tokens."""

    def resolve_model(self, model: str) -> str:
        """An alias's model id, else `model` itself."""
        return self.aliases.get(model, model)

    def tool_names(self) -> list[str]:
        """Names of the tools configured under `conversation.tools` (without `'*'`)."""
        return sorted(name for name in self.conversation.tools if name != ALL_TOOLS)

    def tool_config(self, name: str, builtin_default: ToolConfig | None = None) -> ToolConfig:
        """Effective settings of tool `name`: builtin default < `'*'` < `tools.<name>`."""
        merged = builtin_default if builtin_default is not None else ToolConfig()
        for layer in (self.conversation.tools.get(ALL_TOOLS), self.conversation.tools.get(name)):
            if layer is not None:
                merged = merge_tool_config(merged, layer)
        return merged

    def inquiry_assistant(self, target: PartialAssistantConfig | None = None) -> AssistantConfig:
        """Assistant for an LLM inquiry: `target` < `conversation.inquiry.assistant` < `assistant`.

        (Left of `<` wins.) `target` is a question's table-form `target`, if any.
        """
        return self.assistant.apply(self.conversation.inquiry.assistant, target)

    def with_model(self, model_id: str, *, source: str = "model") -> "Config":
        """A copy with `assistant.model.id` replaced; a bad id raises `ConfigError`."""
        layer = {"assistant": {"model": {"id": model_id}}}
        try:
            over = Config.model_validate(layer)
        except ValidationError as exc:
            raise from_validation_error(exc, source=source, data=layer) from None
        return merge_models(self, over)
