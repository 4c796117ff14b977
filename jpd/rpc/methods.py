"""The handlers of the client-to-server methods of the method table, one thin function each.

Handlers receive validated pydantic params and return pydantic results; all logic
lives in the daemon core. Names and models come from `jpd.protocol.method_table`.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from jpd import __version__
from jpd.core.daemon import Daemon
from jpd.llm.registry import KNOWN
from jpd.protocol import method_table as mt
from jpd.protocol.base import NoParams, WireModel
from jpd.protocol.client_port import ClientCapabilities
from jpd.protocol.config_requests import ConfigEntry, ConfigShowParams, ConfigShowResult
from jpd.protocol.conversation_requests import (
    ConversationCompactParams,
    ConversationDeleteResult,
    ConversationForkParams,
    ConversationGrepParams,
    ConversationIdParams,
    ConversationListParams,
    ConversationListResult,
    ConversationUpdateParams,
    ConversationUpdateResult,
)
from jpd.protocol.daemon_requests import DaemonStatusResult, DaemonStopResult
from jpd.protocol.errors import InvalidParams, WrongDaemon
from jpd.protocol.initialize import (
    InitializeParams,
    InitializeResult,
    ServerCapabilities,
    ServerInfo,
)
from jpd.protocol.model_requests import ModelListParams, ModelListResult, ProviderStatus
from jpd.protocol.server_requests import InquiryAnswerParams, InquiryAnswerResult, InquiryListResult
from jpd.protocol.tool_requests import (
    ToolCallParams,
    ToolCallResult,
    ToolInfo,
    ToolListParams,
    ToolListResult,
)
from jpd.protocol.turn_requests import (
    TurnAttachParams,
    TurnAttachResult,
    TurnCancelParams,
    TurnCancelResult,
    TurnChangesParams,
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
from jpd.rpc.pygls_private import EncodedResult
from jpd.rpc.session import Session
from jpd.rpc.turn_listing import TurnListing

log = logging.getLogger(__name__)

Handler = Callable[[Daemon, Session, Any], Awaitable[WireModel | EncodedResult | None]]
OnLoop = Callable[[Callable[[], object]], None]
"""Runs an action on the event loop (soon, when called from the reader thread)."""
InstantHandler = Callable[[Daemon, Session, Any, OnLoop], WireModel | EncodedResult | None]
"""A handler that answers without waiting, or returns None when it would have to wait.
It may run in the connection's reader thread (`jpd.rpc.lane`): it reads snapshots of
the daemon's state and changes it only through `OnLoop`."""
Incoming = mt.ClientRequest[Any, Any] | mt.ClientNotification[Any]


async def initialize(daemon: Daemon, session: Session, p: InitializeParams) -> WireModel:
    """Record the client's capabilities; may be sent again to update them."""
    _check_data_dir(daemon, p)
    _apply_initialize(daemon, session, p)
    return _INITIALIZED


def initialize_now(
    daemon: Daemon, p: InitializeParams, on_loop: Callable[[Callable[[Session], None]], None]
) -> WireModel:
    """`initialize` answered by a reader thread (its result is static): the session's
    state changes on the loop, before the requests read after it (`on_loop` keeps
    their order, and gives the session: it may not exist yet)."""
    _check_data_dir(daemon, p)
    on_loop(lambda session: _apply_initialize(daemon, session, p))
    return _INITIALIZED


def _check_data_dir(daemon: Daemon, p: InitializeParams) -> None:
    if p.data_dir is not None and not _same_dir(p.data_dir, daemon.settings.data_dir):
        raise WrongDaemon(
            f"this jpd serves the data dir {daemon.settings.data_dir}, not {p.data_dir}; "
            "use the daemon of that data dir (its own socket)"
        )


def _apply_initialize(daemon: Daemon, session: Session, p: InitializeParams) -> None:
    caps = p.capabilities
    session.capabilities_ = ClientCapabilities(
        prompt_answer_types=frozenset(caps.prompt.answer_types if caps.prompt else ()),
        permission=caps.permission,
    )
    session.workspace_root_ = Path(p.workspace_root) if p.workspace_root else None
    session.client_name = p.client_info.name
    session.initialized = True
    daemon.client_ready(session)


def _same_dir(a: str, b: Path) -> bool:
    return os.path.realpath(os.path.expanduser(a)) == os.path.realpath(b)


async def initialized(daemon: Daemon, session: Session, p: NoParams) -> None:
    """Acknowledgement of `initialize`; nothing to do."""


async def shutdown(daemon: Daemon, session: Session, p: NoParams) -> None:
    """After this, requests get -32600 and `exit` ends the connection with code 0."""
    session.shutdown_requested = True


async def exit_(daemon: Daemon, session: Session, p: NoParams) -> None:
    """End the connection: exit code 0 after `shutdown`, 1 otherwise."""
    session.close(0 if session.shutdown_requested else 1)


async def turn_start(daemon: Daemon, session: Session, p: TurnStartParams) -> WireModel:
    """Start a turn in the daemon and return its ids at once."""
    if not p.persist and p.conversation_id is not None and not p.create:
        raise InvalidParams("persist: false is for a new conversation only")
    info = await daemon.start_turn(
        session,
        p.message,
        conversation_id=p.conversation_id,
        create=p.create,
        model=p.model,
        config=p.config,
        toggles=list(p.tools),
        detached=p.detached,
        mode=p.mode,
        images=p.images,
        environment=p.environment,
        response_schema=p.response_schema,
        config_files=p.config_files,
        attachments=p.attachments,
    )
    await daemon.after_start(info, p)
    try:
        warnings = await daemon.configs.file_warnings(daemon.request_env(session, p.environment))
    except Exception:  # the turn runs already: a note about keys must not fail it
        log.exception("config warnings")
        warnings = []
    return TurnStartResult(
        conversation_id=info.conversation_id, turn_id=info.turn_id, config_warnings=warnings or None
    )


async def turn_cancel(daemon: Daemon, session: Session, p: TurnCancelParams) -> WireModel:
    """Cancel a running turn (False if it is not running); in a fleet, also one queued or
    running on another member."""
    return TurnCancelResult(cancelled=await daemon.cancel_turn_anywhere(p.turn_id))


async def turn_resume(daemon: Daemon, session: Session, p: TurnResumeParams) -> WireModel:
    """Continue an interrupted turn under its id and return at once (protocol.md 5.21)."""
    info = await daemon.resume_turn(
        session, p.conversation_id, p.turn_id, detached=p.detached, environment=p.environment
    )
    return TurnResumeResult(conversation_id=info.conversation_id, turn_id=info.turn_id)


async def turn_wait(daemon: Daemon, session: Session, p: TurnWaitParams) -> WireModel:
    """Wait until a running turn ends (cancelling this request leaves the turn running)."""
    stop = await daemon.wait_turn(p.turn_id)
    return TurnWaitResult(turn_id=p.turn_id, stop_reason=stop)


async def turn_attach(daemon: Daemon, session: Session, p: TurnAttachParams) -> WireModel:
    """Subscribe to a conversation's events, replaying those after `fromSeq`."""
    session.on_attach(p.conversation_id)
    last, oldest = await daemon.attach(session, p.conversation_id, p.from_seq)
    running = [t for t in daemon.running_turns() if t.conversation_id == p.conversation_id]
    return TurnAttachResult(
        conversation_id=p.conversation_id,
        last_seq=last,
        oldest_seq=oldest,
        running_turns=running,
    )


async def turn_detach(daemon: Daemon, session: Session, p: TurnDetachParams) -> WireModel:
    """Stop receiving a conversation's events; its turns keep running."""
    return TurnDetachResult(detached=daemon.detach(session, p.conversation_id))


async def turn_list(daemon: Daemon, session: Session, p: NoParams) -> WireModel:
    """Running turns, then resumable ones, and pending inquiries."""
    return TurnListResult(
        turns=await daemon.list_turns(), inquiries=await daemon.pending_inquiries()
    )


def turn_list_now(
    daemon: Daemon, session: Session, p: NoParams, on_loop: OnLoop
) -> EncodedResult | None:
    """`turn_list` at once (None during the start-up recovery: then `turn_list` waits)."""
    turns = daemon.listed_turns()
    if turns is None:  # also in a fleet, where the store is read (`turn_list`)
        return None
    return _LISTING.result(turns, daemon.pending_inquiries_here())


_LISTING = TurnListing()


def turn_cancel_now(
    daemon: Daemon, session: Session, p: TurnCancelParams, on_loop: OnLoop
) -> WireModel | None:
    """`turn_cancel`, which never waits: a running turn is cancelled on the loop (None:
    in a fleet, a turn not running here, which `turn_cancel` looks for in the store)."""
    running = daemon.is_running(p.turn_id)
    if running:
        on_loop(lambda: daemon.cancel_turn(p.turn_id))
        return TurnCancelResult(cancelled=True)
    return None if daemon.queue is not None else TurnCancelResult(cancelled=False)


async def turn_undo(daemon: Daemon, session: Session, p: TurnUndoParams) -> WireModel:
    """Restore the files a turn changed; record that in the conversation."""
    done = await daemon.undo_turn(p.conversation_id, p.turn_id)
    return TurnUndoResult(turn_id=done.turn_id, restored=done.restored, removed=done.removed)


async def turn_changes(daemon: Daemon, session: Session, p: TurnChangesParams) -> WireModel:
    """The files a turn changed, with their text before it."""
    return await daemon.turn_changes(p.conversation_id, p.turn_id)


async def config_show(daemon: Daemon, session: Session, p: ConfigShowParams) -> WireModel:
    """The effective config, one leaf per entry, with the layer it came from."""
    renv = daemon.request_env(session, p.environment)
    overrides = p.config
    if p.config_files:
        from jpd.config.merge import deep_merge

        overrides = deep_merge(await daemon.configs.named(renv, p.config_files), p.config or {})
    rows, warnings = await daemon.configs.show(renv, overrides)
    return ConfigShowResult(
        entries=[
            ConfigEntry(key=key, value=value, origin=origin, redacted=redacted)
            for key, value, origin, redacted in rows
        ],
        warnings=warnings,
    )


async def model_list(daemon: Daemon, session: Session, p: ModelListParams) -> WireModel:
    """Providers (usable or why not), the default model and the aliases."""
    from jpd.llm.registry import key_variable

    cfg, statuses = await daemon.list_models(session, p.environment)
    return ModelListResult(
        default_model=cfg.assistant.model.id,
        aliases=dict(cfg.aliases),
        providers=[
            ProviderStatus(
                name=name,
                available=problem is None,
                key_variable=key_variable(cfg, name),
                problem=problem,
                models=models,
            )
            for name, problem, models in statuses
        ],
    )


async def conversation_list(
    daemon: Daemon, session: Session, p: ConversationListParams
) -> WireModel:
    """The stored conversations `p` selects, pinned then most recently updated first."""
    return ConversationListResult(conversations=await daemon.list_conversations(p))


async def conversation_update(
    daemon: Daemon, session: Session, p: ConversationUpdateParams
) -> WireModel:
    """Change a conversation's title, labels, archived, pinned or expiry (5.26)."""
    if p.add_attachments:  # read once now: a missing file is an error here, not later
        await daemon.check_attachments(session, p.add_attachments, p.environment)
    return ConversationUpdateResult(conversation=await daemon.organize.update(p))


async def conversation_fork(
    daemon: Daemon, session: Session, p: ConversationForkParams
) -> WireModel:
    """A new conversation carrying a copy of some or all turns of another (5.27)."""
    return await daemon.organize.fork(p)


async def conversation_grep(
    daemon: Daemon, session: Session, p: ConversationGrepParams
) -> WireModel:
    """Matching message lines across conversations (5.28)."""
    return await daemon.organize.grep(p)


async def conversation_get(
    daemon: Daemon, session: Session, p: ConversationIdParams
) -> EncodedResult:
    """A conversation's persisted events."""
    events = await daemon.get_conversation(p.conversation_id)
    # The stored events are spliced into the answer as they are (no decode/re-encode);
    # the shape is `ConversationGetResult`'s.
    head = json.dumps({"conversationId": p.conversation_id})[:-1].encode()
    # One copy, made by `bytes.join` without the GIL (see framing.encode_frame).
    return EncodedResult(b"".join((head, b', "events": ', events, b"}")))


async def conversation_delete(
    daemon: Daemon, session: Session, p: ConversationIdParams
) -> WireModel:
    """Delete a conversation and its log."""
    await daemon.delete_conversation(p.conversation_id)
    return ConversationDeleteResult(deleted=True)


async def conversation_compact(
    daemon: Daemon, session: Session, p: ConversationCompactParams
) -> WireModel:
    """Compact a conversation now (protocol.md 5.25)."""
    return await daemon.compact_conversation(session, p.conversation_id, p.instructions)


async def tool_list(daemon: Daemon, session: Session, p: ToolListParams) -> WireModel:
    """The effective tools (enabled or not) with their JSON schemas."""
    tools = await daemon.list_tools(session, p.environment)
    return ToolListResult(
        tools=[
            ToolInfo(
                name=t.name,
                source=t.source,
                server=t.mcp.server if t.mcp else None,
                mcp_tool=t.mcp.tool if t.mcp else None,
                enabled=t.enabled,
                run=t.config.run,
                result=t.config.result,
                summary=t.config.summary or t.config.description,
                parameters=t.schema,
                hidden=t.config.style.hidden,
            )
            for t in tools
        ]
    )


async def tool_call(daemon: Daemon, session: Session, p: ToolCallParams) -> WireModel:
    """Run one tool outside a turn; questions and permissions are asked as in a turn."""
    content, is_error = await daemon.call_tool(
        session, p.name, p.arguments, p.conversation_id, p.detached, p.environment
    )
    return ToolCallResult(content=content, is_error=is_error)


async def inquiry_list(daemon: Daemon, session: Session, p: NoParams) -> WireModel:
    """Questions and permission requests waiting for an answer."""
    return InquiryListResult(inquiries=await daemon.pending_inquiries())


async def inquiry_answer(daemon: Daemon, session: Session, p: InquiryAnswerParams) -> WireModel:
    """Answer a pending question (e.g. a deferred one, or from a second client)."""
    await daemon.answer_inquiry(
        session, p.inquiry_id, p.answer, p.remember, p.conversation_id, p.turn_id
    )
    return InquiryAnswerResult(accepted=True)


def inquiry_answer_first(daemon: Daemon, session: Session, p: InquiryAnswerParams) -> WireModel:
    """`inquiry_answer` of a question pending in this daemon, run on the loop ahead of
    the connection's queued work (`jpd.rpc.answers.ThreadAnswers`): nothing awaited, the
    same checks and "first valid answer wins" as `inquiry_answer`."""
    daemon.answer_inquiry_here(
        session, p.inquiry_id, p.answer, p.remember, p.conversation_id, p.turn_id
    )
    return InquiryAnswerResult(accepted=True)


async def daemon_status(daemon: Daemon, session: Session, p: NoParams) -> WireModel:
    """The daemon process: pid, version, uptime, socket, clients, running turns."""
    return daemon_status_now(daemon, session, p, lambda action: None)


def daemon_status_now(daemon: Daemon, session: Session, p: NoParams, on_loop: OnLoop) -> WireModel:
    """`daemon_status`, which never waits."""
    from jpd.config import user_config_path

    host = session.host
    assert host is not None  # the boundary always sets one
    return DaemonStatusResult(
        pid=os.getpid(),
        version=__version__,
        uptime=round(host.uptime(), 3),
        socket_path=str(host.socket_path) if host.socket_path is not None else None,
        clients=host.client_count(),
        running_turns=daemon.running_turns(),
        data_dir=str(daemon.settings.data_dir),
        config_path=str(user_config_path(daemon.settings.env)),
        log_file=str(daemon.settings.log_file) if daemon.settings.log_file else None,
    )


async def daemon_stop(daemon: Daemon, session: Session, p: NoParams) -> WireModel:
    """Stop the daemon: running turns are cancelled and recorded, then it exits 0."""
    host = session.host
    assert host is not None
    turns = daemon.running_turns()
    host.request_stop(session)
    return DaemonStopResult(cancelled_turns=turns)


HANDLERS: dict[Incoming, Handler] = {
    mt.INITIALIZE: initialize,
    mt.INITIALIZED: initialized,
    mt.SHUTDOWN: shutdown,
    mt.EXIT: exit_,
    mt.TURN_START: turn_start,
    mt.TURN_CANCEL: turn_cancel,
    mt.TURN_RESUME: turn_resume,
    mt.TURN_WAIT: turn_wait,
    mt.TURN_ATTACH: turn_attach,
    mt.TURN_DETACH: turn_detach,
    mt.TURN_LIST: turn_list,
    mt.TURN_UNDO: turn_undo,
    mt.TURN_CHANGES: turn_changes,
    mt.MODEL_LIST: model_list,
    mt.CONFIG_SHOW: config_show,
    mt.CONVERSATION_LIST: conversation_list,
    mt.CONVERSATION_GET: conversation_get,
    mt.CONVERSATION_DELETE: conversation_delete,
    mt.CONVERSATION_COMPACT: conversation_compact,
    mt.CONVERSATION_UPDATE: conversation_update,
    mt.CONVERSATION_FORK: conversation_fork,
    mt.CONVERSATION_GREP: conversation_grep,
    mt.TOOL_LIST: tool_list,
    mt.TOOL_CALL: tool_call,
    mt.INQUIRY_LIST: inquiry_list,
    mt.INQUIRY_ANSWER: inquiry_answer,
    mt.DAEMON_STATUS: daemon_status,
    mt.DAEMON_STOP: daemon_stop,
}
"""Every client-to-server method but `$/cancelRequest` (the rpc layer's own)."""

_METHOD_NAMES = sorted(m.name for m in HANDLERS)
_INITIALIZED = InitializeResult(
    server_info=ServerInfo(version=__version__),
    capabilities=ServerCapabilities(methods=_METHOD_NAMES, providers=list(KNOWN)),
)

INSTANT: dict[Incoming, InstantHandler] = {
    mt.TURN_LIST: turn_list_now,
    mt.TURN_CANCEL: turn_cancel_now,
    mt.DAEMON_STATUS: daemon_status_now,
}
"""Control requests the rpc layer answers in the step that reads them, ahead of queued
events, when they need no wait (protocol.md section 3): while a thousand turns stream,
a request handled as a task waits several turns of a crowded event loop."""


def _unhandled() -> list[str]:
    incoming = {
        m
        for m in mt.TABLE.values()
        if isinstance(m, mt.ClientRequest | mt.ClientNotification) and m is not mt.CANCEL_REQUEST
    }
    return sorted(m.name for m in incoming.symmetric_difference(HANDLERS))


if _unhandled():  # a method in the table without a handler (or the reverse) is a bug
    raise RuntimeError(f"method table and handlers disagree on: {', '.join(_unhandled())}")
