"""`DaemonParts`: the parts of the daemon core that its request handlers
(`turn_start`, `tool_call`) work with, made once by the `Daemon`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jpd.conversation.port import ConversationStorage
from jpd.core.configs import RequestConfigs
from jpd.core.conversations import Conversations
from jpd.core.hub import EventHub
from jpd.core.request_env import RequestEnv
from jpd.core.running_turns import RunningTurns
from jpd.core.toolbox import Toolbox
from jpd.protocol.client_port import ClientLink
from jpd.protocol.environment import ClientEnvironment


@dataclass(frozen=True)
class DaemonParts:
    """The store, event hub, configs, conversations, running turns and tools of one
    daemon, and how a request's environment is made (protocol.md 5.5)."""

    store: ConversationStorage
    hub: EventHub
    configs: RequestConfigs
    conversations: Conversations
    turns: RunningTurns
    tools: Toolbox
    request_env: Callable[[ClientLink, ClientEnvironment | None], RequestEnv]
