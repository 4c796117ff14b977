"""`jp acp`'s ACP agent: editor sessions mapped onto the shared daemon's conversations.

`session/new` names a new conversation (created by its first prompt), `session/load`
replays a conversation and follows it, `session/resume` follows it without replay
(continuing an interrupted last turn),
`session/list` lists conversations (newest first, by workspace), `session/prompt`
runs a turn in the daemon and streams it, `session/cancel` cancels it. Turns run in
the daemon: when the editor goes away they go on, and `jp attach` follows them.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from acp import PROTOCOL_VERSION, RequestError
from acp.schema import (
    AgentCapabilities,
    ClientCapabilities,
    CloseSessionResponse,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    DeleteSessionRequest,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionAdditionalDirectoriesCapabilities,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionDeleteCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
)

from jpcli import __version__
from jpcli.acp import commands, session_info
from jpcli.acp import link as daemon_link
from jpcli.acp.asking import answer_types
from jpcli.acp.images import image_reader
from jpcli.acp.inputs import mcp_config, prompt_images, prompt_text
from jpcli.acp.lines import DELETE_ROUTE
from jpcli.acp.link import DaemonLink, LinkClosed, LinkError
from jpcli.acp.live_output import declares_terminal_output
from jpcli.acp.session import Editor, Session, new_session_id
from jpcli.acp.trusting import offer_trust
from jpcli.acp.updates import history
from jpcli.daemon import DaemonError
from jpcli.remote import remote_from_env, request_environment
from jpcli.rpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND

log = logging.getLogger(__name__)

BUSY = -32005  # the daemon's code for "the conversation already has a running turn"
RESOURCE_NOT_FOUND = -32002  # ACP's code for an unknown session
CONVERSATION_NOT_FOUND = -32001  # the daemon's (protocol.md 11)


def _error(exc: LinkError | DaemonError | LinkClosed) -> RequestError:
    """A daemon failure as the JSON-RPC error the editor gets."""
    if isinstance(exc, LinkError):
        # The daemon's "no such conversation" is ACP's "resource not found".
        code = RESOURCE_NOT_FOUND if exc.code == CONVERSATION_NOT_FOUND else exc.code
        return RequestError(code, exc.message, exc.data)
    return RequestError(INTERNAL_ERROR, f"jpd: {exc}")


def _absolute(cwd: str) -> str:
    if not os.path.isabs(cwd):
        raise RequestError(INVALID_PARAMS, f"cwd must be an absolute path, got {cwd!r}")
    return _normal(cwd)


def _normal(path: str) -> str:
    return os.path.normpath(path)


def _roots(kwargs: dict[str, Any]) -> list[str]:
    """A session request's `additionalDirectories`: absolute, else -32602."""
    return [_absolute(path) for path in kwargs.get("additional_directories") or []]


class JpAgent:
    """The ACP agent (see the module docstring); one per `jp acp` process."""

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        self.editor: Editor | None = None
        self.environ = environ
        self.forms = False
        self.terminal_output = False
        self.usage = False
        """The editor declared `_meta.usage`: `session/prompt` answers carry `usage`."""
        self.sessions: dict[str, Session] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._control: DaemonLink | None = None
        self._trust_asked: set[str] = set()

    def on_connect(self, conn: Any) -> None:
        """Keep the connection to the editor (the SDK calls this once)."""
        self.editor = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        """Negotiate the version and declare what the bridge does."""
        elicitation = client_capabilities.elicitation if client_capabilities else None
        self.forms = elicitation is not None and elicitation.form is not None
        self.terminal_output = declares_terminal_output(client_capabilities)
        meta = getattr(client_capabilities, "field_meta", None)
        self.usage = isinstance(meta, dict) and meta.get("usage") is True
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                # Images: the daemon refuses them, clearly, for a model without images.
                prompt_capabilities=PromptCapabilities(embedded_context=True, image=True),
                mcp_capabilities=McpCapabilities(http=True, sse=False),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(),
                    resume=SessionResumeCapabilities(),
                    close=SessionCloseCapabilities(),
                    delete=SessionDeleteCapabilities(),
                    additional_directories=SessionAdditionalDirectoriesCapabilities(),
                ),
            ),
            agent_info=Implementation(name="jp", title="jp (jpd)", version=__version__),
        )

    # --- sessions -------------------------------------------------------------------

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> NewSessionResponse:
        """A new conversation in the workspace `cwd` (created by the first prompt)."""
        config = mcp_config(mcp_servers)
        session = await self._open(new_session_id(), _absolute(cwd), exists=False)
        session.config = config
        session.extra_roots = _roots(kwargs)
        self._announce(session)
        return NewSessionResponse(
            session_id=session.session_id,
            config_options=session.choices.options(),
            modes=session.choices.modes(),
        )

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> LoadSessionResponse:
        """Replay the whole conversation as `session/update`s, then follow it live."""
        config = mcp_config(mcp_servers)
        session = await self._open(session_id, _absolute(cwd), exists=True)
        session.config = config
        session.extra_roots = _roots(kwargs)
        session.held = []
        try:
            attached = await session.daemon.request(
                "turn/attach", {"conversationId": session_id, "fromSeq": 0}
            )
            stored = await session.daemon.request(
                "conversation/get", {"conversationId": session_id}
            )
        except (LinkError, LinkClosed) as exc:
            await self._forget(session)
            raise _error(exc) from None
        hidden = await self._hidden_tools(session)
        events = stored.get("events", [])
        session.choices.restore(events)  # what the conversation last ran with
        running = [t["turnId"] for t in attached.get("runningTurns", [])]
        held, session.held = session.held, None
        live = [e for e in held if e.get("turnId") in running]
        has_start = any((e.get("event") or {}).get("kind") == "turn_started" for e in live)
        if running and has_start:
            # The running turn's persisted part is shown from the replay buffer instead,
            # deltas included: cut the log after that turn's user message.
            cut = next(
                (i for i, e in enumerate(events) if e.get("turn_id") == running[0]), len(events)
            )
            events = events[: cut + 2]
        reader = image_reader(await self._data_dir(), session_id)
        await session.send(history(events, hidden, session.translator.ids, reader))
        for params in live if has_start else []:
            await session.forward(params)
        self._announce(session)
        return LoadSessionResponse(
            config_options=session.choices.options(), modes=session.choices.modes()
        )

    async def resume_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> ResumeSessionResponse:
        """Follow the conversation again, without replaying it; a turn the daemon was
        stopped during is continued (`turn/resume`, protocol.md 5.21) and shown live."""
        config = mcp_config(mcp_servers)
        session = await self._open(session_id, _absolute(cwd), exists=True)
        session.config = config
        session.extra_roots = _roots(kwargs)
        try:
            await session.daemon.request("turn/attach", {"conversationId": session_id})
            listed = await session.daemon.request("turn/list")
            cut = [
                t
                for t in listed.get("turns", [])
                if t.get("resumable") and t.get("conversationId") == session_id
            ]
            if cut:
                await session.daemon.request(
                    "turn/resume",
                    {
                        "conversationId": session_id,
                        "turnId": cut[-1]["turnId"],
                        "environment": self._environment(session),
                    },
                )
            stored = await session.daemon.request(
                "conversation/get", {"conversationId": session_id}
            )
        except (LinkError, LinkClosed) as exc:
            await self._forget(session)
            raise _error(exc) from None
        session.choices.restore(stored.get("events", []))
        self._announce(session)
        return ResumeSessionResponse(
            config_options=session.choices.options(), modes=session.choices.modes()
        )

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        """Stop following the session; its running turn goes on in the daemon."""
        await self._forget(self._session(session_id))
        return CloseSessionResponse()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Methods the SDK does not route, reached through `lines.EXTENSION_ROUTES`."""
        if method == DELETE_ROUTE:
            request = DeleteSessionRequest.model_validate(params)
            await self.delete_session(request.session_id)
            return {}
        raise RequestError(METHOD_NOT_FOUND, f"method not found: {method}")

    async def delete_session(self, session_id: str) -> None:
        """Delete the conversation from the daemon (`conversation/delete`)."""
        session = self.sessions.get(session_id)
        if session is not None:
            if session.live_turn is not None or session.prompt is not None:
                raise RequestError(BUSY, f"session {session_id} has a running turn")
            await self._forget(session)
        try:
            control = await self._control_link()
            await control.request("conversation/delete", {"conversationId": session_id})
        except (LinkError, LinkClosed, DaemonError) as exc:
            raise _error(exc) from None

    async def _control_link(self) -> DaemonLink:
        """The connection for requests of no session (list, delete)."""
        if self._control is None or self._control.closed.is_set():
            self._control = await daemon_link.connect(os.getcwd(), {}, environ=self.environ)
        return self._control

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        """Conversations with a known workspace, newest first, of `cwd` when given."""
        wanted = _absolute(cwd) if cwd is not None else None
        try:
            listed = await (await self._control_link()).request("conversation/list")
        except (LinkError, LinkClosed, DaemonError) as exc:
            raise _error(exc) from None
        sessions = [
            SessionInfo(
                session_id=c["conversationId"],
                cwd=c["workspace"],
                title=c.get("title") or None,
                updated_at=c.get("updatedAt"),
            )
            for c in listed.get("conversations", [])
            if c.get("workspace") and (wanted is None or _normal(c["workspace"]) == wanted)
        ]
        return ListSessionsResponse(sessions=sessions)

    # --- turns ----------------------------------------------------------------------

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        """Run one turn in the daemon, streaming it; answer with its stop reason."""
        session = self._session(session_id)
        if session.prompt is not None:
            raise RequestError(BUSY, f"session {session_id} already has a prompt running")
        message = prompt_text(prompt)
        if self.editor is not None:
            await offer_trust(
                self.editor, session_id, session.cwd, self.environ or os.environ, self._trust_asked
            )
        if session.daemon.closed.is_set():
            await self._reconnect(session)
        command = commands.parse(message)
        if command is not None:
            await commands.run(session, *command)
            return PromptResponse(stop_reason="end_turn")
        params: dict[str, Any] = {
            "message": message,
            "conversationId": session_id,
            # As `jp` does (protocol.md 5.5): the turn runs with the environment the
            # editor started the bridge with, in the session's workspace.
            "environment": self._environment(session),
        }
        if not session.exists:
            params["create"] = True
        images = prompt_images(prompt)
        if images:
            params["images"] = images
        chosen = session.choices.turn_params()
        config = {**session.config, **chosen.pop("config", {})}
        params.update(chosen)
        if config:
            params["config"] = config
        waiting: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        session.prompt, session.prompt_turn, session.cancel_requested = waiting, None, False
        try:
            try:
                started = await session.daemon.request("turn/start", params)
            except (LinkError, LinkClosed) as exc:
                raise _error(exc) from None
            session.exists = True
            session.prompt_turn = started["turnId"]
            session.settle(started["turnId"])
            if session.cancel_requested:
                await self._cancel_turn(session, started["turnId"])
            closed = asyncio.ensure_future(session.daemon.closed.wait())
            try:
                await asyncio.wait({waiting, closed}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                closed.cancel()
            if not waiting.done():
                raise RequestError(INTERNAL_ERROR, "jpd closed the connection during the turn")
            try:
                ended = waiting.result()
            except LinkClosed as exc:
                raise _error(exc) from None
        finally:
            session.prompt = None
        await session_info.send_title(session)
        if ended.stop_reason == "error":
            raise RequestError(INTERNAL_ERROR, f"the turn failed: {ended.error}")
        # `usage` is unstable in ACP: only for an editor that declares it (`_meta.usage`).
        usage = session.translator.usage() if self.usage else None
        return PromptResponse(stop_reason=ended.stop_reason, usage=usage)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """Cancel the session's running turn (the prompt then answers `cancelled`)."""
        session = self.sessions.get(session_id)
        if session is None:
            log.warning("session/cancel for unknown session %s", session_id)
            return
        turn_id = session.prompt_turn or session.live_turn
        if turn_id is None:
            session.cancel_requested = session.prompt is not None  # turn/start still on its way
            return
        await self._cancel_turn(session, turn_id)

    # --- config options ---------------------------------------------------------------

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        """Change the model, reasoning effort or mode from the next prompt on."""
        session = self._session(session_id)
        session.choices.set(config_id, value)
        if config_id == "mode":
            await session.send(
                [
                    CurrentModeUpdate(
                        session_update="current_mode_update",
                        current_mode_id=session.choices.mode,
                    )
                ]
            )
        return SetSessionConfigOptionResponse(config_options=session.choices.options())

    async def set_session_mode(
        self, mode_id: str, session_id: str, **kwargs: Any
    ) -> SetSessionModeResponse:
        """The older mode picker: the same as setting the `mode` config option."""
        session = self._session(session_id)
        session.choices.set_mode(mode_id)
        await session.send(
            [
                ConfigOptionUpdate(
                    session_update="config_option_update",
                    config_options=session.choices.options(),
                )
            ]
        )
        return SetSessionModeResponse()

    # --- internals ------------------------------------------------------------------

    def _environment(self, session: Session) -> dict[str, Any]:
        """A request's `environment` (protocol.md 5.5): the session's workspace, its
        additional directories and the environment the editor started the bridge with."""
        # Over `jp --remote`, the remote's own workspace and variables (jpcli.remote).
        environment = request_environment(session.cwd, self.environ or os.environ)
        if session.extra_roots:
            environment["additionalRoots"] = list(session.extra_roots)
        return environment

    def _announce(self, session: Session) -> None:
        """Commands and title to the editor once the session's response has gone out."""
        task = asyncio.create_task(session_info.announce(session))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _data_dir(self) -> str | None:
        """The daemon's data folder when it is on this machine (images of a replay)."""
        if remote_from_env(self.environ or os.environ) is not None:
            return None
        try:
            status = await (await self._control_link()).request("daemon/status")
        except (LinkError, LinkClosed, DaemonError) as exc:
            log.warning("daemon/status failed; replayed images are not shown: %s", exc)
            return None
        data_dir = status.get("dataDir") if isinstance(status, dict) else None
        return data_dir if isinstance(data_dir, str) else None

    async def _hidden_tools(self, session: Session) -> frozenset[str]:
        """Names of the tools not to show in a replay (`style.hidden`); none when the
        workspace's config cannot be read (the replay must not fail over it)."""
        try:
            tools = await session.daemon.request("tool/list")
        except (LinkError, LinkClosed) as exc:
            log.warning("tool/list failed, replaying every tool call: %s", exc)
            return frozenset()
        return frozenset(t["name"] for t in tools.get("tools", []) if t.get("hidden"))

    async def _cancel_turn(self, session: Session, turn_id: str) -> None:
        try:
            await session.daemon.request("turn/cancel", {"turnId": turn_id})
        except (LinkError, LinkClosed) as exc:
            log.warning("turn/cancel failed: %s", exc)

    def _session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError(
                RESOURCE_NOT_FOUND,
                f"unknown session {session_id!r}: create it with session/new, or open it "
                "with session/load or session/resume",
            )
        return session

    async def _open(self, session_id: str, cwd: str, *, exists: bool) -> Session:
        old = self.sessions.pop(session_id, None)
        if old is not None:
            await old.close()
        assert self.editor is not None, "no editor connection"
        session = Session(
            session_id=session_id,
            cwd=cwd,
            editor=self.editor,
            forms=self.forms,
            terminal_output=self.terminal_output,
            answer_types=frozenset(answer_types(self.forms)),
            exists=exists,
        )
        await self._connect(session)
        session.choices = await session_info.load_choices(session, self._environment(session))
        self.sessions[session_id] = session
        return session

    async def _connect(self, session: Session) -> None:
        capabilities = {"prompt": {"answerTypes": answer_types(self.forms)}, "permission": True}
        try:
            session.link = await daemon_link.connect(
                session.cwd, capabilities, environ=self.environ, configure=session.configure
            )
        except (LinkError, LinkClosed, DaemonError) as exc:
            raise _error(exc) from None

    async def _reconnect(self, session: Session) -> None:
        """A new daemon connection for a session whose daemon went away (stopped, or
        restarted): the next prompt starts the daemon again, as `jp` would."""
        log.warning("jpd went away; connecting session %s again", session.session_id)
        await self._connect(session)
        if session.exists:
            try:
                await session.daemon.request("turn/attach", {"conversationId": session.session_id})
            except (LinkError, LinkClosed) as exc:
                raise _error(exc) from None

    async def _forget(self, session: Session) -> None:
        self.sessions.pop(session.session_id, None)
        await session.close()

    async def aclose(self) -> None:
        """Close every daemon connection (the editor went away); turns keep running."""
        for session in list(self.sessions.values()):
            await self._forget(session)
        if self._control is not None:
            await self._control.close()
