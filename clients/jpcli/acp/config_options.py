"""A session's model, reasoning effort and permission mode, as ACP config options.

`session/new`, `load` and `resume` answer with `configOptions` (and the modes as `modes`
for clients older than config options); `session/set_config_option` changes one and
answers the full list; the change applies from the next prompt, whose `turn/start`
gets `model`, `mode` and the effort as a `config` override. The models offered are
what the daemon's `model/list` says the session's environment can use: the default
model, the `[aliases]` and the embedded model, each only when its provider is usable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from acp import RequestError
from acp.schema import (
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
)

from jpcli.rpc import INVALID_PARAMS

MODES: dict[str, tuple[str, str]] = {
    "ask": ("Ask", "Ask before running tools as configured"),
    "accept-edits": ("Accept edits", "File edits run without asking; commands still ask"),
    "auto": ("Auto", "Everything runs without asking"),
    "read-only": ("Read only", "Tools that write files and commands are refused"),
}
"""The daemon's permission modes (protocol.md 5.5.1): id -> (name, description)."""

EFFORTS = ("off", "low", "medium", "high")
"""`assistant.reasoning.effort` values."""

REASONING_PROVIDERS = frozenset({"anthropic", "openai"})
"""Providers whose models take a reasoning effort."""

EMBEDDED_MODEL = "local/smollm2"
"""The embedded model's id (the `local` provider's default)."""

CONFIGURED = "configured"
"""The effort value meaning "as the config says" (no override)."""


@dataclass(frozen=True)
class Model:
    """One model the session may pick."""

    value: str
    name: str
    description: str | None = None


def models_from(listed: dict[str, Any]) -> tuple[str, list[Model]]:
    """(the default model id, the usable models) from a `model/list` result."""
    usable = {p["name"] for p in listed.get("providers", []) if p.get("available")}
    default = str(listed.get("defaultModel", ""))
    models: list[Model] = []
    seen: set[str] = set()

    def add(value: str, name: str, description: str | None = None) -> None:
        model = str((listed.get("aliases") or {}).get(value, value))
        if value and value not in seen and model.split("/", 1)[0] in usable:
            seen.add(value)
            models.append(Model(value, name, description))

    add(default, f"{default} (default)", "the configured default model")
    for alias, target in sorted((listed.get("aliases") or {}).items()):
        add(str(alias), str(alias), str(target))
    add(EMBEDDED_MODEL, "Embedded (smollm2)", "the model that runs inside the daemon")
    return default, models


@dataclass
class Choices:
    """What the session's next prompt runs with."""

    default_model: str = ""
    models: list[Model] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    """The picked model (a model id or an alias); None: the configured default."""
    effort: str = CONFIGURED
    mode: str = "ask"

    @classmethod
    def from_listing(cls, listed: dict[str, Any]) -> Choices:
        default, models = models_from(listed)
        return cls(default_model=default, models=models, aliases=dict(listed.get("aliases") or {}))

    @property
    def current_model(self) -> str:
        return self.model or self.default_model

    def reasons(self) -> bool:
        """Whether the current model takes a reasoning effort."""
        model = self.aliases.get(self.current_model, self.current_model)
        return model.split("/", 1)[0] in REASONING_PROVIDERS

    # --- the ACP view ----------------------------------------------------------

    def options(self) -> list[SessionConfigOptionSelect]:
        """The full list of config options, with the current values."""
        offered = list(self.models)
        if self.current_model and all(m.value != self.current_model for m in offered):
            offered.insert(0, Model(self.current_model, self.current_model))
        options = [
            SessionConfigOptionSelect(
                type="select",
                id="model",
                name="Model",
                category="model",
                current_value=self.current_model,
                options=[
                    SessionConfigSelectOption(value=m.value, name=m.name, description=m.description)
                    for m in offered
                ],
            ),
        ]
        if self.reasons():
            options.append(
                SessionConfigOptionSelect(
                    type="select",
                    id="thought_level",
                    name="Reasoning effort",
                    category="thought_level",
                    current_value=self.effort,
                    options=[
                        SessionConfigSelectOption(value=CONFIGURED, name="As configured"),
                        *(SessionConfigSelectOption(value=e, name=e.title()) for e in EFFORTS),
                    ],
                )
            )
        options.append(
            SessionConfigOptionSelect(
                type="select",
                id="mode",
                name="Mode",
                category="mode",
                current_value=self.mode,
                options=[
                    SessionConfigSelectOption(value=mode, name=name, description=description)
                    for mode, (name, description) in MODES.items()
                ],
            )
        )
        return options

    def modes(self) -> SessionModeState:
        """The permission modes as the older `modes` state."""
        return SessionModeState(
            current_mode_id=self.mode,
            available_modes=[
                SessionMode(id=mode, name=name, description=description)
                for mode, (name, description) in MODES.items()
            ],
        )

    # --- changes -----------------------------------------------------------------

    def set(self, config_id: str, value: Any) -> None:
        """Change one option; -32602 for an unknown option or value."""
        if not isinstance(value, str):
            raise RequestError(INVALID_PARAMS, f"config option {config_id!r} takes a string")
        if config_id == "model":
            if value not in {m.value for m in self.models} | {self.current_model}:
                known = ", ".join(m.value for m in self.models) or "none"
                raise RequestError(INVALID_PARAMS, f"unknown model {value!r}; models: {known}")
            self.model = None if value == self.default_model else value
        elif config_id == "thought_level" and self.reasons():
            if value not in (CONFIGURED, *EFFORTS):
                raise RequestError(INVALID_PARAMS, f"unknown reasoning effort {value!r}")
            self.effort = value
        elif config_id == "mode":
            self.set_mode(value)
        else:
            raise RequestError(INVALID_PARAMS, f"unknown config option {config_id!r}")

    def restore(self, events: list[dict[str, Any]]) -> None:
        """Pick again the model, reasoning effort and mode the conversation's last turn
        ran with (its `turn_start`), where this session may still use them."""
        starts = [e for e in events if e.get("type") == "turn_start"]
        if not starts:
            return
        last = starts[-1]
        if last.get("mode") in MODES:
            self.mode = str(last["mode"])
        model = last.get("model")
        for offered in self.models:
            if model in (offered.value, self.aliases.get(offered.value)):
                self.model = None if offered.value == self.default_model else offered.value
                break
        if last.get("reasoning_effort") in EFFORTS and self.reasons():
            self.effort = str(last["reasoning_effort"])

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise RequestError(INVALID_PARAMS, f"unknown mode {mode!r}; modes: {', '.join(MODES)}")
        self.mode = mode

    def turn_params(self) -> dict[str, Any]:
        """What `turn/start` gets from the choices (`config` to merge with the rest)."""
        params: dict[str, Any] = {"mode": self.mode}
        if self.model is not None:
            params["model"] = self.model
        if self.effort != CONFIGURED and self.reasons():
            params["config"] = {"assistant": {"reasoning": {"effort": self.effort}}}
        return params
