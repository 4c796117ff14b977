"""Results of `daemon/status` and `daemon/stop` (protocol.md 5.18, 5.19; camelCase on the wire)."""

from jpd.protocol.base import WireModel
from jpd.protocol.summaries import TurnInfo


class DaemonStatusResult(WireModel):
    pid: int
    version: str
    uptime: float
    """Seconds since the daemon started serving."""
    socket_path: str | None = None
    """The Unix socket the daemon listens on; absent on stdio."""
    clients: int
    """Open connections, the asking one included."""
    running_turns: list[TurnInfo]
    data_dir: str
    """Where conversations are stored."""
    config_path: str
    """The user config file the daemon reads when a request sends no environment."""
    log_file: str | None = None
    """The daemon's log file; absent when it logs to stderr only (stdio)."""


class DaemonStopResult(WireModel):
    stopping: bool = True
    cancelled_turns: list[TurnInfo]
    """The turns that were running; each is cancelled and records its end."""
