"""The handlers of the client-to-server methods of the method table, one thin function each.

Handlers receive validated pydantic params and return pydantic results; all logic
lives in the daemon core. Names and models come from `jpd.protocol.method_table`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from jpd import __version__
from jpd.core.daemon import Daemon
from jpd.llm.registry import KNOWN
from jpd.protocol import method_table as mt
from jpd.protocol.base import NoParams, WireModel
from jpd.protocol.client_port import ClientCapabilities
from jpd.protocol.daemon_requests import DaemonStatusResult, DaemonStopResult
from jpd.protocol.errors import WrongDaemon
from jpd.protocol.initialize import (
    InitializeParams,
    InitializeResult,
    ServerCapabilities,
    ServerInfo,
)
from jpd.rpc.conversation_methods import (
    conversation_compact,
    conversation_delete,
    conversation_fork,
    conversation_get,
    conversation_grep,
    conversation_list,
    conversation_update,
)
from jpd.rpc.handler_types import Handler, Incoming, InstantHandler, OnLoop
from jpd.rpc.session import Session
from jpd.rpc.tool_methods import config_show, model_list, tool_call, tool_list
from jpd.rpc.turn_methods import (
    inquiry_answer,
    inquiry_list,
    turn_attach,
    turn_cancel,
    turn_cancel_now,
    turn_changes,
    turn_detach,
    turn_list,
    turn_list_now,
    turn_resume,
    turn_start,
    turn_undo,
    turn_wait,
)


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
