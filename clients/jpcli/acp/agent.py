"""`jp acp`'s ACP agent: editor sessions mapped onto the shared daemon's conversations.

`session/new` names a new conversation (created by its first prompt), `session/load`
replays a conversation and follows it, `session/resume` follows it without replay
(continuing an interrupted last turn),
`session/list` lists conversations (newest first, by workspace), `session/prompt`
runs a turn in the daemon and streams it, `session/cancel` cancels it. Turns run in
the daemon: when the editor goes away they go on, and `jp attach` follows them.

The agent routes each ACP method; the work is in `capabilities` (`initialize`),
`replay` (`session/load`), `prompting` (`session/prompt`'s turn), `control` (requests
of no session) and `daemon_errors` (the daemon's failures as the editor's errors).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from acp import RequestError
from acp.schema import (
    ClientCapabilities,
    CloseSessionResponse,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    DeleteSessionRequest,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    ResumeSessionResponse,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
)

from jpcli.acp import commands, session_info
from jpcli.acp import link as daemon_link
from jpcli.acp.asking import answer_types
from jpcli.acp.capabilities import declares_forms, declares_usage, initialize_response
from jpcli.acp.control import Control
from jpcli.acp.daemon_errors import BUSY, RESOURCE_NOT_FOUND, request_error
from jpcli.acp.inputs import absolute_path, additional_roots, mcp_config, prompt_text
from jpcli.acp.lines import DELETE_ROUTE
from jpcli.acp.link import LinkClosed, LinkError
from jpcli.acp.live_output import declares_terminal_output
from jpcli.acp.prompting import cancel_turn, run_turn, turn_start_params
from jpcli.acp.replay import replay
from jpcli.acp.session import Editor, Session, new_session_id
from jpcli.acp.trusting import offer_trust
from jpcli.daemon import DaemonError
from jpcli.remote import request_environment
from jpcli.rpc import INTERNAL_ERROR, METHOD_NOT_FOUND

log = logging.getLogger(__name__)


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
        self._control = Control(environ)
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
        self.forms = declares_forms(client_capabilities)
        self.terminal_output = declares_terminal_output(client_capabilities)
        self.usage = declares_usage(client_capabilities)
        return initialize_response(protocol_version)

    # --- sessions -------------------------------------------------------------------

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> NewSessionResponse:
        """A new conversation in the workspace `cwd` (created by the first prompt)."""
        config = mcp_config(mcp_servers)
        session = await self._open(new_session_id(), absolute_path(cwd), exists=False)
        session.config = config
        session.extra_roots = additional_roots(kwargs)
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
        session = await self._open(session_id, absolute_path(cwd), exists=True)
        session.config = config
        session.extra_roots = additional_roots(kwargs)
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
            raise request_error(exc) from None
        await replay(session, attached, stored, self._control.data_dir)
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
        session = await self._open(session_id, absolute_path(cwd), exists=True)
        session.config = config
        session.extra_roots = additional_roots(kwargs)
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
            raise request_error(exc) from None
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
        await self._control.delete(session_id)

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        """Conversations with a known workspace, newest first, of `cwd` when given."""
        wanted = absolute_path(cwd) if cwd is not None else None
        return ListSessionsResponse(sessions=await self._control.sessions(wanted))

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
        params = turn_start_params(session, message, prompt, self._environment(session))
        ended = await run_turn(session, params)
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
        await cancel_turn(session, turn_id)

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
            raise request_error(exc) from None

    async def _reconnect(self, session: Session) -> None:
        """A new daemon connection for a session whose daemon went away (stopped, or
        restarted): the next prompt starts the daemon again, as `jp` would."""
        log.warning("jpd went away; connecting session %s again", session.session_id)
        await self._connect(session)
        if session.exists:
            try:
                await session.daemon.request("turn/attach", {"conversationId": session.session_id})
            except (LinkError, LinkClosed) as exc:
                raise request_error(exc) from None

    async def _forget(self, session: Session) -> None:
        self.sessions.pop(session.session_id, None)
        await session.close()

    async def aclose(self) -> None:
        """Close every daemon connection (the editor went away); turns keep running."""
        for session in list(self.sessions.values()):
            await self._forget(session)
        await self._control.close()
