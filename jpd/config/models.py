"""Config models for the assistant, the providers and the daemon itself.

Every model forbids unknown keys and is strict about types (TOML and JSON both
carry types, so `max_tokens = "100"` is a mistake worth reporting), except paths,
which arrive as strings. Relative paths resolve against the directory of the file
that set them: the loader passes it as the validation context `base_dir`.
"""

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
)

from jpd.config.merge import deep_merge


class ConfigModel(BaseModel):
    """Base of every config model: snake_case keys, no unknown keys, strict types."""

    # Built as each class is defined, not deferred: the config loads with the first
    # request that needs it, which validates it whole at once. Deferred, a model used
    # both inside another and on its own (`ToolConfig()` in `Config.tool_config`) had
    # its schema generated twice, once inline in its parent and once for itself.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _resolve_path(value: Path, info: ValidationInfo) -> Path:
    value = value.expanduser()
    context = info.context
    base = context.get("base_dir") if isinstance(context, dict) else None
    if not value.is_absolute() and isinstance(base, Path):
        return base / value
    return value


ConfigPath = Annotated[Path, Field(strict=False), AfterValidator(_resolve_path)]
"""A path; relative paths resolve against the directory of the config file."""


def _check_model_id(value: str) -> str:
    provider, sep, name = value.partition("/")
    if not sep or not provider or not name:
        raise ValueError(f"model id must be '<provider>/<model>', got {value!r}")
    return value


ModelId = Annotated[str, AfterValidator(_check_model_id)]
ReasoningEffort = Literal["off", "low", "medium", "high"]


# --- assistant ---------------------------------------------------------------------


class ModelParameters(ConfigModel):
    max_tokens: Annotated[int, Field(gt=0)] | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = None


class ModelConfig(ConfigModel):
    id: ModelId = "local/smollm2"
    parameters: ModelParameters = ModelParameters()
    context_window: Annotated[int, Field(gt=0)] | None = None
    """The model's context window in tokens (default: built in for known models;
    `providers.local.n_ctx` for the embedded one; protocol.md 12.5)."""

    @property
    def provider(self) -> str:
        """The provider part of the id (before the first `/`)."""
        return self.id.partition("/")[0]

    @property
    def name(self) -> str:
        """The model part of the id (after the first `/`)."""
        return self.id.partition("/")[2]


class ReasoningConfig(ConfigModel):
    effort: ReasoningEffort = "off"
    budget_tokens: Annotated[int, Field(gt=0)] | None = None


class PartialModelConfig(ConfigModel):
    id: ModelId | None = None
    parameters: ModelParameters | None = None
    context_window: Annotated[int, Field(gt=0)] | None = None


class PartialReasoningConfig(ConfigModel):
    effort: ReasoningEffort | None = None
    budget_tokens: Annotated[int, Field(gt=0)] | None = None


class PartialAssistantConfig(ConfigModel):
    """Overrides of `assistant` (protocol.md 10.4), e.g. for inquiries; unset keys inherit."""

    system_prompt: str | None = None
    model: PartialModelConfig | None = None
    reasoning: PartialReasoningConfig | None = None


class ContrastExample(ConfigModel):
    good: str
    bad: str
    reason: str | None = None


class InstructionsConfig(ConfigModel):
    """One of JP's `[[assistant.instructions]]`: a titled list of rules with examples,
    sent in the system prompt as an `<instruction>` section."""

    title: str | None = None
    description: str | None = None
    position: int = 0
    """Sections and instructions are sent in order of `position`, then as listed."""
    items: list[str] = []
    examples: list[str | ContrastExample] = []


class SectionConfig(ConfigModel):
    """One of `assistant.system_prompt_sections`: text added to the system prompt."""

    content: str
    tag: str | None = None
    """Wrap the content in `<tag>...</tag>`."""
    title: str | None = None
    position: int = 0


def _section_or_text(value: Any) -> Any:
    return {"content": value} if isinstance(value, str) else value


def _check_file_name(value: str) -> str:
    # A name, never a path: these files are looked up in the workspace's folders only.
    if not value or "/" in value or "\\" in value or value in (".", ".."):
        raise ValueError(f"a file name without '/' is expected, got {value!r}")
    return value


def _instruction_or_title(value: Any) -> Any:
    return {"title": value} if isinstance(value, str) else value


class AssistantConfig(ConfigModel):
    system_prompt: str | None = None
    system_prompt_sections: list[Annotated[SectionConfig, BeforeValidator(_section_or_text)]] = []
    instructions: list[Annotated[InstructionsConfig, BeforeValidator(_instruction_or_title)]] = []
    agents_files: list[Annotated[str, AfterValidator(_check_file_name)]] = ["AGENTS.md"]
    """Project instruction files read into the system prompt: each name at the
    workspace root and in every folder down to the working one (empty: none)."""
    model: ModelConfig = ModelConfig()
    reasoning: ReasoningConfig = ReasoningConfig()
    tool_choice: Annotated[str, Field(min_length=1)] = "auto"
    """For the first model call of a turn: `auto`, `none`, `any` (some tool), or a
    tool name (that tool). Later calls of the turn use `auto`."""

    def apply(self, *partials: PartialAssistantConfig | None) -> "AssistantConfig":
        """Lay `partials` over this config, each over the previous (None is skipped)."""
        data: dict[str, Any] = self.model_dump(exclude_unset=True)
        for partial in partials:
            if partial is not None:
                data = deep_merge(data, partial.model_dump(exclude_unset=True, exclude_none=True))
        return AssistantConfig.model_validate(data)


# --- providers ---------------------------------------------------------------------


class TestProviderConfig(ConfigModel):
    __test__ = False  # not a pytest test class despite the name

    script: ConfigPath | None = None
    record: ConfigPath | None = None


class LocalProviderConfig(ConfigModel):
    model_path: ConfigPath | None = None
    n_ctx: Annotated[int, Field(gt=0)] = 2048
    n_threads: Annotated[int, Field(gt=0)] | None = None
    seed: int = 0
    idle_timeout: Annotated[float, Field(gt=0)] = 600.0
    """Seconds the model's worker process stays loaded after its last request."""


class HostedProviderConfig(ConfigModel):
    base_url: str | None = None
    api_key_env: str
    max_retries: Annotated[int, Field(ge=0)] = 3
    timeout: Annotated[float, Field(gt=0)] = 600.0


class AnthropicProviderConfig(HostedProviderConfig):
    api_key_env: str = "ANTHROPIC_API_KEY"


class OpenAIProviderConfig(HostedProviderConfig):
    api_key_env: str = "OPENAI_API_KEY"
    api: Literal["responses", "chat"] = "responses"
    """The API `openai/<model>` speaks: the Responses API (reasoning carried between
    turns) or Chat Completions."""


class GoogleProviderConfig(HostedProviderConfig):
    api_key_env: str = "GEMINI_API_KEY"


class OllamaProviderConfig(ConfigModel):
    base_url: str = "http://127.0.0.1:11434"
    max_retries: Annotated[int, Field(ge=0)] = 3
    timeout: Annotated[float, Field(gt=0)] = 600.0


class OpenAICompatibleProviderConfig(ConfigModel):
    base_url: str | None = None
    api_key_env: str | None = None
    max_retries: Annotated[int, Field(ge=0)] = 3
    timeout: Annotated[float, Field(gt=0)] = 600.0
    app_url: str | None = None
    """Sent as `HTTP-Referer` (OpenRouter's app attribution)."""
    app_title: str | None = None
    """Sent as `X-Title` (OpenRouter's app attribution)."""

    def headers(self) -> dict[str, str]:
        """The attribution headers to send with every request."""
        headers: dict[str, str] = {}
        if self.app_url:
            headers["HTTP-Referer"] = self.app_url
        if self.app_title:
            headers["X-Title"] = self.app_title
        return headers


class ProvidersConfig(ConfigModel):
    test: TestProviderConfig = TestProviderConfig()
    local: LocalProviderConfig = LocalProviderConfig()
    anthropic: AnthropicProviderConfig = AnthropicProviderConfig()
    openai: OpenAIProviderConfig = OpenAIProviderConfig()
    openai_compatible: OpenAICompatibleProviderConfig = OpenAICompatibleProviderConfig()
    google: GoogleProviderConfig = GoogleProviderConfig()
    ollama: OllamaProviderConfig = OllamaProviderConfig()

    def api_key_variables(self) -> frozenset[str]:
        """The environment variables that hold provider API keys (kept from tools)."""
        names = {self.anthropic.api_key_env, self.openai.api_key_env, self.google.api_key_env}
        if self.openai_compatible.api_key_env:
            names.add(self.openai_compatible.api_key_env)
        return frozenset(names)


# --- daemon ------------------------------------------------------------------------

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _check_log_level(value: str) -> str:
    upper = value.upper()
    if upper not in _LOG_LEVELS:
        raise ValueError(f"log level must be one of {', '.join(_LOG_LEVELS)}, got {value!r}")
    return upper


class StoreConfig(ConfigModel):
    """`[daemon.store]`: where conversations are stored (`JPD_STORE_URL` wins)."""

    url: str | None = None
    """`postgresql://...`: share conversations with other daemons; unset: JSONL files."""


class FleetConfig(ConfigModel):
    """`[daemon.fleet]`: this daemon as a member of a fleet on one Postgres store."""

    host: str | None = None
    """This member's name in turn leases (default: the hostname)."""
    lease_ttl: Annotated[float, Field(ge=1.0, le=3600.0)] = 15.0
    """Seconds a turn lease lasts unless renewed; another daemon takes the turn over
    once it expired."""
    max_turns: Annotated[int, Field(ge=1, le=100_000)] = 256
    """Turns this member runs at once; a `turn/start` beyond them waits in the fleet's
    queue for a member with room (its client follows it there)."""
    provider_limits: dict[str, Annotated[int, Field(ge=1, le=10_000)]] = {}
    """Provider name -> at most this many model calls at once to it, on all the
    members together (a call waits for a slot; a tool waiting for a person holds none)."""


class DaemonConfig(ConfigModel):
    store: StoreConfig = StoreConfig()
    fleet: FleetConfig = FleetConfig()
    idle_timeout: Annotated[float, Field(ge=0)] = 600.0
    """Seconds without clients or running turns before the daemon exits; 0 = never."""
    log_level: Annotated[str, AfterValidator(_check_log_level)] = "WARNING"
    replay_buffer: Annotated[int, Field(ge=0)] = 10000
    """Events kept in memory per conversation for `turn/attach` replay."""
    replay_buffer_bytes: Annotated[int, Field(ge=0)] = 16 * 1024 * 1024
    """Bytes of those events kept at most (in memory, and on disk once idle)."""
    max_frame_bytes: Annotated[int, Field(ge=1024)] = 64 * 1024 * 1024
    """Largest incoming message body; a larger frame is refused and skipped unread."""
    send_queue_bytes: Annotated[int, Field(ge=4096)] = 8 * 1024 * 1024
    """Bytes queued for one client before it lags (its `turn/event`s stop)."""
    client_stall_timeout: Annotated[float, Field(gt=0)] = 60.0
    """Seconds a write to a client may block before the client is dropped as stuck."""
