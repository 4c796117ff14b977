"""The one method table: every JSON-RPC method by name, its params and result models,
and which side sends it (protocol.md, "Methods").

The rpc boundary registers handlers for the client-to-server entries and frames the
server-to-client ones; the client port (`ClientLink`) takes these entries instead of
method names; `jpd.schemas` exports a schema for each. A method exists on the wire
exactly when it has an entry here.
"""

from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, TypeVar

from pydantic import ValidationError

from jpd.protocol import server_requests as s
from jpd.protocol.base import NoParams, WireModel
from jpd.protocol.config_requests import ConfigShowParams, ConfigShowResult
from jpd.protocol.conversation_requests import (
    ConversationCompactParams,
    ConversationCompactResult,
    ConversationDeleteResult,
    ConversationForkParams,
    ConversationForkResult,
    ConversationGetResult,
    ConversationGrepParams,
    ConversationGrepResult,
    ConversationIdParams,
    ConversationListParams,
    ConversationListResult,
    ConversationUpdateParams,
    ConversationUpdateResult,
)
from jpd.protocol.daemon_requests import DaemonStatusResult, DaemonStopResult
from jpd.protocol.errors import InvalidClientResult
from jpd.protocol.initialize import InitializeParams, InitializeResult
from jpd.protocol.model_requests import ModelListParams, ModelListResult
from jpd.protocol.tool_requests import (
    ToolCallParams,
    ToolCallResult,
    ToolListParams,
    ToolListResult,
)
from jpd.protocol.turn_events import TurnEventParams, TurnLaggedParams
from jpd.protocol.turn_requests import (
    TurnAttachParams,
    TurnAttachResult,
    TurnCancelParams,
    TurnCancelResult,
    TurnChangesParams,
    TurnChangesResult,
    TurnDetachParams,
    TurnDetachResult,
    TurnListResult,
    TurnResumeParams,
    TurnResumeResult,
    TurnStartParams,
    TurnStartResult,
    TurnUndoParams,
    TurnUndoResult,
    TurnWaitParams,
    TurnWaitResult,
)

Direction = Literal[
    "client_request", "client_notification", "server_request", "server_notification"
]

P = TypeVar("P", bound=WireModel)
R = TypeVar("R", bound=WireModel)


@dataclass(frozen=True)
class ClientRequest(Generic[P, R]):
    """A request the client sends and the daemon answers; `result` None means `null`."""

    name: str
    params: type[P]
    result: type[R] | None
    direction: ClassVar[Direction] = "client_request"


@dataclass(frozen=True)
class ClientNotification(Generic[P]):
    """A notification the client sends; nothing is answered."""

    name: str
    params: type[P]
    direction: ClassVar[Direction] = "client_notification"


@dataclass(frozen=True)
class ServerRequest(Generic[P, R]):
    """A request the daemon sends; the client's result is validated with `result`."""

    name: str
    params: type[P]
    result: type[R]
    direction: ClassVar[Direction] = "server_request"

    def read_result(self, raw: Any) -> R:
        """A client's result, validated; raises `InvalidClientResult` naming the problem."""
        try:
            return self.result.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(p) for p in first["loc"]) or "result"
            raise InvalidClientResult(
                f"invalid result for {self.name}: {where}: {first['msg']}"
            ) from None


@dataclass(frozen=True)
class ServerNotification(Generic[P]):
    """A notification the daemon sends to a client."""

    name: str
    params: type[P]
    direction: ClassVar[Direction] = "server_notification"


Method = (
    ClientRequest[Any, Any]
    | ClientNotification[Any]
    | ServerRequest[Any, Any]
    | ServerNotification[Any]
)


class CancelRequestParams(WireModel):
    """Params of the `$/cancelRequest` notification (handled by the RPC layer)."""

    id: int | str


# --- client to server ----------------------------------------------------------------

INITIALIZE = ClientRequest("initialize", InitializeParams, InitializeResult)
INITIALIZED = ClientNotification("initialized", NoParams)
SHUTDOWN = ClientRequest[NoParams, WireModel]("shutdown", NoParams, None)
EXIT = ClientNotification("exit", NoParams)
CANCEL_REQUEST = ClientNotification("$/cancelRequest", CancelRequestParams)
TURN_START = ClientRequest("turn/start", TurnStartParams, TurnStartResult)
TURN_CANCEL = ClientRequest("turn/cancel", TurnCancelParams, TurnCancelResult)
TURN_RESUME = ClientRequest("turn/resume", TurnResumeParams, TurnResumeResult)
TURN_WAIT = ClientRequest("turn/wait", TurnWaitParams, TurnWaitResult)
TURN_ATTACH = ClientRequest("turn/attach", TurnAttachParams, TurnAttachResult)
TURN_DETACH = ClientRequest("turn/detach", TurnDetachParams, TurnDetachResult)
TURN_LIST = ClientRequest("turn/list", NoParams, TurnListResult)
TURN_UNDO = ClientRequest("turn/undo", TurnUndoParams, TurnUndoResult)
TURN_CHANGES = ClientRequest("turn/changes", TurnChangesParams, TurnChangesResult)
MODEL_LIST = ClientRequest("model/list", ModelListParams, ModelListResult)
CONFIG_SHOW = ClientRequest("config/show", ConfigShowParams, ConfigShowResult)
CONVERSATION_LIST = ClientRequest(
    "conversation/list", ConversationListParams, ConversationListResult
)
CONVERSATION_UPDATE = ClientRequest(
    "conversation/update", ConversationUpdateParams, ConversationUpdateResult
)
CONVERSATION_FORK = ClientRequest(
    "conversation/fork", ConversationForkParams, ConversationForkResult
)
CONVERSATION_GREP = ClientRequest(
    "conversation/grep", ConversationGrepParams, ConversationGrepResult
)
CONVERSATION_GET = ClientRequest("conversation/get", ConversationIdParams, ConversationGetResult)
CONVERSATION_DELETE = ClientRequest(
    "conversation/delete", ConversationIdParams, ConversationDeleteResult
)
CONVERSATION_COMPACT = ClientRequest(
    "conversation/compact", ConversationCompactParams, ConversationCompactResult
)
TOOL_LIST = ClientRequest("tool/list", ToolListParams, ToolListResult)
TOOL_CALL = ClientRequest("tool/call", ToolCallParams, ToolCallResult)
INQUIRY_LIST = ClientRequest("inquiry/list", NoParams, s.InquiryListResult)
INQUIRY_ANSWER = ClientRequest("inquiry/answer", s.InquiryAnswerParams, s.InquiryAnswerResult)
DAEMON_STATUS = ClientRequest("daemon/status", NoParams, DaemonStatusResult)
DAEMON_STOP = ClientRequest("daemon/stop", NoParams, DaemonStopResult)

# --- server to client ----------------------------------------------------------------

TURN_EVENT = ServerNotification("turn/event", TurnEventParams)
TURN_LAGGED = ServerNotification("turn/lagged", TurnLaggedParams)
INQUIRY_PROMPT = ServerRequest("inquiry/prompt", s.InquiryPromptParams, s.InquiryPromptResult)
TOOL_PERMISSION = ServerRequest("tool/permission", s.PermissionParams, s.PermissionResult)
INQUIRY_RESOLVED = ServerNotification("inquiry/resolved", s.InquiryResolvedParams)

TABLE: dict[str, Method] = {
    m.name: m
    for m in (
        INITIALIZE,
        INITIALIZED,
        SHUTDOWN,
        EXIT,
        CANCEL_REQUEST,
        TURN_START,
        TURN_CANCEL,
        TURN_RESUME,
        TURN_WAIT,
        TURN_ATTACH,
        TURN_DETACH,
        TURN_LIST,
        TURN_UNDO,
        TURN_CHANGES,
        MODEL_LIST,
        CONFIG_SHOW,
        CONVERSATION_LIST,
        CONVERSATION_GET,
        CONVERSATION_DELETE,
        CONVERSATION_COMPACT,
        CONVERSATION_UPDATE,
        CONVERSATION_FORK,
        CONVERSATION_GREP,
        TOOL_LIST,
        TOOL_CALL,
        INQUIRY_LIST,
        INQUIRY_ANSWER,
        DAEMON_STATUS,
        DAEMON_STOP,
        TURN_EVENT,
        TURN_LAGGED,
        INQUIRY_PROMPT,
        TOOL_PERMISSION,
        INQUIRY_RESOLVED,
    )
}
"""Every method, by its wire name."""
