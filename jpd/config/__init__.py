"""Configuration: pydantic models and the layered TOML loader.

Layers, lowest first: built-in defaults < user file (`$JP_CONFIG` or
`<user_config_dir>/config.toml`) < `<workspace>/.jp/config.toml` < overrides
(`turn/start` config, `jp -c key=value`).
"""

from jpd.config.config import (
    ALL_TOOLS,
    Config,
    ConversationConfig,
    InquiryConfig,
    merge_tool_config,
)
from jpd.config.errors import ConfigError
from jpd.config.loader import (
    load_config,
    parse_assignment,
    read_toml_layer,
    user_config_path,
    validate_layer,
    workspace_config_path,
)
from jpd.config.merge import deep_merge
from jpd.config.models import (
    AnthropicProviderConfig,
    AssistantConfig,
    DaemonConfig,
    LocalProviderConfig,
    ModelConfig,
    ModelParameters,
    OpenAICompatibleProviderConfig,
    OpenAIProviderConfig,
    PartialAssistantConfig,
    PartialModelConfig,
    PartialReasoningConfig,
    ProvidersConfig,
    ReasoningConfig,
    ReasoningEffort,
    TestProviderConfig,
)
from jpd.config.tools import (
    DEFAULT_DETACHED_MODE,
    AllowToggle,
    CommandConfig,
    DetachedFallback,
    DetachedKind,
    DetachedKinds,
    DetachedMode,
    EnableConfig,
    ParameterConfig,
    ParameterType,
    QuestionConfig,
    ResultMode,
    RunMode,
    StyleConfig,
    ToolConfig,
)

__all__ = [
    "ALL_TOOLS",
    "DEFAULT_DETACHED_MODE",
    "AllowToggle",
    "AnthropicProviderConfig",
    "AssistantConfig",
    "CommandConfig",
    "Config",
    "ConfigError",
    "ConversationConfig",
    "DaemonConfig",
    "DetachedFallback",
    "DetachedKind",
    "DetachedKinds",
    "DetachedMode",
    "EnableConfig",
    "InquiryConfig",
    "LocalProviderConfig",
    "ModelConfig",
    "ModelParameters",
    "OpenAICompatibleProviderConfig",
    "OpenAIProviderConfig",
    "ParameterConfig",
    "ParameterType",
    "PartialAssistantConfig",
    "PartialModelConfig",
    "PartialReasoningConfig",
    "ProvidersConfig",
    "QuestionConfig",
    "ReasoningConfig",
    "ReasoningEffort",
    "ResultMode",
    "RunMode",
    "StyleConfig",
    "TestProviderConfig",
    "ToolConfig",
    "deep_merge",
    "load_config",
    "merge_tool_config",
    "parse_assignment",
    "read_toml_layer",
    "user_config_path",
    "validate_layer",
    "workspace_config_path",
]
