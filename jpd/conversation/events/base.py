"""The base of every persisted event, and the clock new events are stamped with."""

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field


def now() -> datetime:
    """The timestamp used for new events (UTC, aware)."""
    return datetime.now(UTC)


class EventBase(BaseModel):
    """What every persisted event has: its `type` (each subclass's) and `timestamp`."""

    # Persisted records tolerate fields added by newer versions.
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    timestamp: datetime = Field(default_factory=now)
