"""Per-tool settings: `conversation.tools.<name>` (and the `'*'` defaults).

Every field is optional in a layer; what matters for merging is which fields a
layer set (`model_fields_set`), see `jpd.config.merge`. Defaults below are what a
consumer sees when no layer set the field.
"""

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Discriminator, Field, Tag

from jpd.config.models import ConfigModel, PartialAssistantConfig
from jpd.protocol.detached import DetachedFallback, DetachedKind, DetachedMode

AllowToggle = Literal["any", "never", "if_named", "if_named_or_group"]
ParameterType = Literal["string", "integer", "number", "boolean", "array", "object", "null"]
RunMode = Literal["ask", "unattended", "skip"]
ResultMode = Literal["unattended", "ask", "skip"]

McpSource = Annotated[str, Field(pattern=r"^mcp\.[^.]+\..+$")]
"""`mcp.<server>.<tool>`: the tool `<tool>` of the MCP server `<server>`."""

DEFAULT_DETACHED_MODE: DetachedMode = "defer"
"""The mode for every kind when nothing sets one (protocol.md section 10.2)."""
DEFAULT_DETACHED_TIMEOUT = 600.0
"""Seconds a `defer`red question waits for a client, unless `detached_timeout` says."""
DEFAULT_DETACHED_FALLBACK: DetachedFallback = "deny"


def _table_or_scalar(value: Any) -> str:
    """Pick the union member by shape, so errors speak of the form the user wrote."""
    return "table" if isinstance(value, dict | BaseModel) else "scalar"


# --- enable (protocol.md 9.1) -------------------------------------------------------

_ENABLE_SHORTHANDS: dict[object, dict[str, Any]] = {
    "on": {"state": True, "allow_toggle": "any"},
    "off": {"state": False, "allow_toggle": "any"},
    "always": {"state": True, "allow_toggle": "never"},
    "explicit": {"state": False, "allow_toggle": "if_named"},
}


def _expand_enable(value: Any) -> Any:
    """Normalize the shorthands to the table form; tables pass through."""
    if isinstance(value, bool):
        return {"state": value, "allow_toggle": "any"}
    if isinstance(value, str):
        if value not in _ENABLE_SHORTHANDS:
            raise ValueError(
                f"expected true, false, 'on', 'off', 'always', 'explicit' or a table, got {value!r}"
            )
        return dict(_ENABLE_SHORTHANDS[value])
    return value


class EnableConfig(ConfigModel):
    """Whether a tool is on, and which toggles (bulk `-T`, by name) may change that."""

    state: bool = True
    allow_toggle: AllowToggle = "any"


# --- command, parameters, style ----------------------------------------------------


class CommandConfig(ConfigModel):
    program: str
    args: list[str] = []
    shell: bool = False


class ParameterConfig(ConfigModel):
    """One argument of a tool, rendered as JSON Schema for the provider."""

    type: Annotated[
        Annotated[ParameterType, Tag("scalar")] | Annotated[list[ParameterType], Tag("list")],
        Discriminator(lambda value: "list" if isinstance(value, list) else "scalar"),
    ]
    """A JSON Schema type, or a list of them (e.g. `["boolean", "string"]`)."""
    required: bool = False
    enum: list[Any] | None = None
    items: "ParameterConfig | None" = None
    properties: "dict[str, ParameterConfig] | None" = None
    default: Any = None
    description: str | None = None


class StyleConfig(ConfigModel):
    hidden: bool = False


# --- questions ---------------------------------------------------------------------


class QuestionConfig(ConfigModel):
    """User settings for one question a tool may ask (protocol.md 10.1, 10.2)."""

    target: Annotated[
        Annotated[Literal["user", "assistant"], Tag("scalar")]
        | Annotated[PartialAssistantConfig, Tag("table")],
        Discriminator(_table_or_scalar),
    ] = "user"
    """`"user"`, `"assistant"`, or assistant overrides (which imply the assistant)."""
    answer: Any = None
    """A fixed answer; when set, the question is never routed."""
    prompt_label: str | None = None
    exclusive: bool | None = None
    """Overrides the tool's own `exclusive` flag when set."""


# --- detached policy (protocol.md section 10.2) ------------------------------------


class DetachedKinds(ConfigModel):
    """`detached` per kind; an unset kind falls through the cascade."""

    run: DetachedMode | None = None
    deliver: DetachedMode | None = None
    tool: DetachedMode | None = None


DetachedSetting = Annotated[
    Annotated[DetachedMode, Tag("scalar")] | Annotated[DetachedKinds, Tag("table")],
    Discriminator(_table_or_scalar),
]


def detached_for(
    setting: DetachedMode | DetachedKinds | None, kind: DetachedKind
) -> DetachedMode | None:
    """The mode one `detached` setting gives for `kind`: per-kind entry, then scalar."""
    if isinstance(setting, DetachedKinds):
        mode: DetachedMode | None = getattr(setting, kind)
        return mode
    return setting


def resolve_detached_mode(
    kind: DetachedKind, *layers: DetachedMode | DetachedKinds | None
) -> DetachedMode:
    """The cascade: the first layer (highest first) that gives a mode for `kind`, through
    its `<kind>` entry and then its scalar, wins; else `defer`.

    The layers are `turn/start` `detached`, `tools.<name>.detached`, `tools.'*'.detached`,
    the built-in tool's default. A merged `ToolConfig` (`Config.tool_config`) holds the
    last three in one `detached` value that resolves the same way.
    """
    for layer in layers:
        mode = detached_for(layer, kind)
        if mode is not None:
            return mode
    return DEFAULT_DETACHED_MODE


@dataclass(frozen=True)
class DetachedPolicy:
    """The detached policy of one tool for one kind, resolved."""

    mode: DetachedMode
    timeout: float
    """Seconds a `defer`red request waits for a client."""
    fallback: DetachedFallback
    """What applies when the `defer` wait ends."""


# --- the tool ----------------------------------------------------------------------


class ToolConfig(ConfigModel):
    """Settings of one tool, or of every tool under the key `'*'`."""

    source: Literal["builtin", "local"] | McpSource | None = None
    """None: builtin when a built-in tool has this name, an MCP server's tool of this
    name, else local; `mcp.<server>.<tool>` names one MCP tool (and may rename it)."""
    command: (
        Annotated[
            Annotated[str, Tag("scalar")] | Annotated[CommandConfig, Tag("table")],
            Discriminator(_table_or_scalar),
        ]
        | None
    ) = None
    """A shell command line (str) or a program with arguments."""
    summary: str | None = None
    description: str | None = None
    parameters: dict[str, ParameterConfig] = {}
    enable: Annotated[EnableConfig, BeforeValidator(_expand_enable)] = EnableConfig()
    run: RunMode = "ask"
    result: ResultMode = "unattended"
    timeout: Annotated[float, Field(gt=0)] | None = None
    """Seconds a local tool may run; None = no limit."""
    max_output: Annotated[int, Field(ge=1024)] = 1_000_000
    """Bytes of a local tool's stdout kept: beyond it, its first and last halves."""
    options: dict[str, Any] = {}
    style: StyleConfig = StyleConfig()
    questions: dict[str, QuestionConfig] = {}
    detached: DetachedSetting | None = None
    detached_timeout: Annotated[float, Field(gt=0)] = DEFAULT_DETACHED_TIMEOUT
    """Seconds a `defer`red question waits for a prompt-capable client."""
    detached_fallback: DetachedFallback = DEFAULT_DETACHED_FALLBACK
    """What a `defer`red question does after `detached_timeout`."""
    env: dict[str, str | bool] = {}
    """Variables put back into a local tool's environment, which otherwise has no
    secrets: `true` passes the variable through, a string sets it, `false` removes it."""

    @property
    def enabled(self) -> bool:
        """Whether the tool is on (`enable.state`)."""
        return self.enable.state

    @property
    def allow_toggle(self) -> AllowToggle:
        """Which toggles may change `enabled` (`enable.allow_toggle`)."""
        return self.enable.allow_toggle

    def detached_policy(
        self, kind: DetachedKind, override: DetachedMode | None = None
    ) -> DetachedPolicy:
        """This (merged) tool's detached policy for `kind`; `override` is the request's
        `detached` (`turn/start`, `tool/call`), which wins over config."""
        return DetachedPolicy(
            mode=resolve_detached_mode(kind, override, self.detached),
            timeout=self.detached_timeout,
            fallback=self.detached_fallback,
        )
