"""Base classes for JSON-RPC wire models: camelCase on the wire, snake_case in Python."""

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class WireModel(BaseModel):
    """A result or notification payload sent to clients."""

    # Every pydantic model in jpd builds its validator on first use rather than at import
    # (`defer_build`): most of them are not needed by a given command, and building them
    # all was most of the daemon's start-up (protocol.md section 4, "Start-up"). Safe
    # across threads from pydantic 2.14 on (it builds under a lock).
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, defer_build=True
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready dict sent on the wire (aliases, no None fields)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class WireParams(WireModel):
    """Params received from clients: unknown fields are rejected."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="forbid",
        defer_build=True,
    )


class NoParams(WireParams):
    """Methods without params accept `null`, absent, or `{}`."""
