"""The daemon core's facade: one `Daemon` that owns the store, providers, event hub and
pending questions, wires the parts that do the work, and is what the rpc layer calls.

The parts, one job each: `turn_start` (starting and resuming turns), `running_turns`
(the turns running now), `tool_call` (`tool/call`), `toolbox` (the tools, their
catalog and coordinators), `conversations` (stored conversations, recovery),
`inquiries` (listing and answering pending questions), and in a fleet `fleet_member`.
Transport-agnostic: clients are `ClientLink`s. Turns run as tasks in the daemon's
task group, so they outlive the request that started them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from jpd.conversation.port import CommitMarks
from jpd.conversation.replay import ReplayFiles
from jpd.core.configs import RequestConfigs
from jpd.core.conversations import Conversations, check_id
from jpd.core.hub import REPLAY_BYTES, EventHub
from jpd.core.inquiries import Inquiries
from jpd.core.organize import Organizer
from jpd.core.parts import DaemonParts
from jpd.core.request_env import RequestEnv, request_env
from jpd.core.running_turns import RunningTurns
from jpd.core.storage import open_storage
from jpd.core.tool_call import ToolCalls
from jpd.core.toolbox import Toolbox
from jpd.core.turn_start import TurnStarter
from jpd.core.turn_undo import TurnUndo
from jpd.inquiry.pending import PendingQuestions
from jpd.llm.registry import ProviderRegistry
from jpd.protocol.client_port import ClientLink
from jpd.protocol.conversation_requests import (
    ConversationCompactResult,
    ConversationListParams,
    ConversationUpdateParams,
)
from jpd.protocol.environment import ClientEnvironment
from jpd.protocol.errors import Busy, ConfigInvalid, NotFound
from jpd.protocol.summaries import ConversationSummary, TurnInfo
from jpd.protocol.turn_events import StopReason
from jpd.protocol.turn_requests import TurnStartParams
from jpd.settings import Settings

# Start-up imports only what `initialize` needs (protocol.md section 4, "Start-up"): the
# config, the turn loop, tools, inquiries and providers load with the first use.
if TYPE_CHECKING:
    from jpd.config import Config
    from jpd.core.follow import Followers
    from jpd.core.remote_prompts import RemotePrompts
    from jpd.core.shared_questions import SharedQuestions
    from jpd.core.turn_queue import TurnQueue
    from jpd.tools.catalog import EffectiveTool

log = logging.getLogger(__name__)


class Daemon:
    """Owns the store, providers, running turns and subscriptions."""

    def __init__(self, settings: Settings, task_group: TaskGroup) -> None:
        self.settings = settings
        self._tg = task_group
        self.providers = ProviderRegistry(settings.env)
        self.configs = RequestConfigs(settings.env)
        self.store = open_storage(settings.data_dir, settings.env, self.configs)
        replay_files = ReplayFiles(settings.data_dir / "replay")
        replay_files.prepare()  # seqs go on from earlier runs (protocol.md section 7.2)
        self.hub = EventHub(
            replay_files, replay_limit=self._replay_limit, replay_bytes=self._replay_bytes
        )
        if isinstance(self.store, CommitMarks):  # a fleet's: clients see what is stored
            from jpd.core.append_gate import AppendGate

            self.hub.gate = AppendGate(self.store, self.hub.send_held)
        self._links: dict[int, ClientLink] = {}
        board = self.store.question_board()
        self.remote: RemotePrompts | None = None
        if board is not None:  # a fleet member: questions reach clients on every member
            from jpd.core.remote_prompts import FleetQuestions, RemotePrompts

            self.remote = RemotePrompts(board, self.hub, lambda: self._links)
            self.questions: PendingQuestions = FleetQuestions(
                self.hub.subscribers, lambda: list(self._links.values()), self.remote
            )
        else:
            self.questions = PendingQuestions(
                self.hub.subscribers, lambda: list(self._links.values())
            )
        self._stopping = False
        self.turns = RunningTurns(self.store, self.hub, task_group)
        self.tools = Toolbox(
            task_group, settings.data_dir, self.questions, self.hub, lambda: self._stopping
        )
        self.conversations = Conversations(self.store, self.hub, self.turns.busy)
        self.organize = Organizer(self.conversations)
        parts = DaemonParts(
            store=self.store,
            hub=self.hub,
            configs=self.configs,
            conversations=self.conversations,
            turns=self.turns,
            tools=self.tools,
            request_env=self.request_env,
        )
        self._parts = parts
        starter = TurnStarter(parts, self.providers, task_group)
        # turn/start, turn/resume and tool/call are the methods of the parts that do the
        # work (jpd.core.turn_start, jpd.core.tool_call): their signatures are written once.
        self.start_turn = starter.start
        self.resume_turn = starter.resume
        self.call_tool = ToolCalls(parts).call
        undoing = TurnUndo(parts)
        self.undo_turn, self.turn_changes = undoing.undo, undoing.changes
        # Turns a stopped daemon left open are closed before any turn starts.
        task_group.start_soon(self.conversations.recover_all)
        self.followers: Followers | None = None
        self.queue: TurnQueue | None = None
        self.shared: SharedQuestions | None = None
        if self.store.turn_stream() is not None:  # a fleet member
            from jpd.core.fleet_member import join_fleet

            member = join_fleet(
                parts, starter, self.questions, self.remote, task_group, self._max_turns()
            )
            self.followers, self.queue, self.shared = member.followers, member.queue, member.shared
        self.inquiries = Inquiries(self.questions, self.shared)
        task_group.start_soon(self._sweep_expired)

    async def _sweep_expired(self) -> None:
        """Delete the conversations whose `--tmp` time is over: now, then each hour."""

        await self.conversations.recovered.wait()
        while True:
            try:
                await self.organize.sweep()
            except Exception:  # a failed sweep is retried at the next
                log.exception("deleting expired conversations failed")
            await anyio.sleep(3600)

    # --- configuration -------------------------------------------------------------

    def request_env(self, link: ClientLink, environment: ClientEnvironment | None) -> RequestEnv:
        """What a request runs with: the client's environment when sent (protocol.md 5.5)."""
        return request_env(
            environment,
            link.workspace_root,
            self.settings.env,
            peer_verified=link.peer_verified,
        )

    def _max_turns(self) -> int:
        try:
            return self.configs.load(None).daemon.fleet.max_turns
        except ConfigInvalid:  # reported as for `_replay_limit`
            from jpd.config.models import FleetConfig

            return FleetConfig().max_turns

    def _replay_bytes(self) -> int:
        try:
            return self.configs.load(None).daemon.replay_buffer_bytes
        except ConfigInvalid:
            return REPLAY_BYTES  # reported as for `_replay_limit`

    def _replay_limit(self) -> int:
        try:
            return self.configs.load(None).daemon.replay_buffer
        except ConfigInvalid as exc:
            # A broken config file must not stop the daemon; each turn reports it.
            log.warning("%s", exc.message)
            return 10_000

    # --- turns (see jpd.core.running_turns) ----------------------------------------

    def cancel_turn(self, turn_id: str) -> bool:
        """Cancel a running turn; False if it already ended."""
        return self.turns.cancel(turn_id)

    async def cancel_turn_anywhere(self, turn_id: str) -> bool:
        """`cancel_turn`, and in a fleet a turn queued or running on another member."""
        if self.turns.cancel(turn_id):
            return True
        return self.queue is not None and await self.queue.cancel(turn_id)

    def is_running(self, turn_id: str) -> bool:
        """Whether a turn of this daemon runs (safe from any thread: `cancel_turn` is not)."""
        return self.turns.has(turn_id)

    async def wait_turn(self, turn_id: str) -> StopReason:
        """Wait for a running turn to end; returns its stop reason."""
        return await self.turns.wait(turn_id)

    async def list_turns(self) -> list[TurnInfo]:
        """Running turns, oldest first, then resumable ones, oldest first (protocol.md 5.10)."""
        await self.conversations.recovered.wait()
        if self.followers is None:
            listed = self.listed_turns()
            assert listed is not None
            return listed
        # A fleet: the turns other members run (or queued for one), too.
        from jpd.core.fleet_member import turns_elsewhere

        resumable = sorted(self.conversations.resumable.values(), key=lambda t: t.started_at)
        running = self.running_turns() + await turns_elsewhere(self.store, self.queue)
        running.sort(key=lambda t: t.started_at)
        return [*running, *resumable]

    def listed_turns(self) -> list[TurnInfo] | None:
        """`list_turns` without waiting: None while the start-up recovery still runs, and
        in a fleet (the store is read then: `list_turns`)."""
        if not self.conversations.recovered.is_set() or self.followers is not None:
            return None
        resumable = list(self.conversations.resumable.values())  # a snapshot: any thread
        resumable.sort(key=lambda t: t.started_at)
        return [*self.running_turns(), *resumable]

    def running_turns(self) -> list[TurnInfo]:
        """Turns currently running, oldest first."""
        return self.turns.running()

    # --- clients and subscriptions ---------------------------------------------------

    async def attach(
        self, link: ClientLink, conversation_id: str, from_seq: int | None
    ) -> tuple[int, int]:
        """Subscribe `link` to a conversation, replaying events after `from_seq`.

        Returns (last seq so far, oldest seq kept for replay).
        """
        check_id(conversation_id)
        if not await self.store.exists(conversation_id):  # a file's stat, or a query
            raise NotFound(f"conversation not found: {conversation_id}")
        following = self.followers is not None and not self.turns.busy(conversation_id)
        if following and from_seq is not None and self.followers is not None:
            # Its turn may run elsewhere: its events so far first, replayed from `fromSeq`.
            await self.followers.follow(conversation_id)
        last, oldest = await self.hub.attach(conversation_id, link, from_seq)
        if following and from_seq is None and self.followers is not None:
            # Its turn may run elsewhere: this client gets it from its start.
            await self.followers.follow(conversation_id)
        self.questions.client_ready(link, conversation_id)
        if following and self.remote is not None:  # asked what other members' turns ask
            await self.remote.watch_now()
        return last, oldest

    def detach(self, link: ClientLink, conversation_id: str) -> bool:
        """Unsubscribe `link` from a conversation."""
        detached = self.hub.unsubscribe(conversation_id, link)
        if detached:
            self._tg.start_soon(self.turns.settle, conversation_id)
        return detached

    def connected(self, link: ClientLink) -> None:
        """A client connected (not yet initialized)."""
        self._links[link.link_id] = link

    def disconnected(self, link: ClientLink) -> None:
        """A client went away: forget its subscriptions; its turns keep running."""
        self._links.pop(link.link_id, None)
        for conversation_id in self.hub.drop(link):
            self._tg.start_soon(self.turns.settle, conversation_id)

    def client_ready(self, link: ClientLink) -> None:
        """A client (re-)initialized: send it the pending questions it can answer."""
        self.questions.client_ready(link)

    # --- models and tools ----------------------------------------------------------

    async def list_models(
        self, link: ClientLink, environment: ClientEnvironment | None = None
    ) -> tuple[Config, list[tuple[str, str | None, list[str] | None]]]:
        """The request's config and, per known provider, why it is unusable (None: usable)
        and the models its server has (None: not listed; Ollama's are)."""
        from jpd.llm.registry import KNOWN

        renv = self.request_env(link, environment)
        cfg = await self.configs.for_request(renv)
        statuses: list[tuple[str, str | None, list[str] | None]] = []
        for name in KNOWN:
            problem = self.providers.unavailable(name, cfg, renv.env)
            models = None
            if problem is None and name == "ollama":
                models, problem = await self.providers.server_models(name, cfg)
            statuses.append((name, problem, models))
        return cfg, statuses

    async def list_tools(
        self, link: ClientLink, environment: ClientEnvironment | None = None
    ) -> list[EffectiveTool]:
        """The effective tools for this client's workspace config."""
        renv = self.request_env(link, environment)
        cfg = await self.configs.for_request(renv)
        return list((await self.tools.catalog(cfg, [], renv.root)).values())

    async def aclose(self) -> None:
        """Cancel running turns, wait until each has recorded its end, close resources."""
        self._stopping = True  # a question cut short now is `daemon_stopped` (protocol.md 10.3)
        await self.turns.cancel_all()
        await self.hub.close()
        await self.tools.close_mcp()
        await self.providers.aclose()
        await self.store.close()
        self.tools.close_processes()

    # --- conversations (see jpd.core.conversations) ----------------------------------

    async def after_start(self, info: TurnInfo, p: TurnStartParams) -> None:
        """What `turn/start` asks of the conversation besides the turn: labels, title,
        expiry, and for `persist: false`, its deletion when the turn ends."""
        expires_in = 0.0 if not p.persist else p.expires_in
        if p.labels or p.title or expires_in is not None:
            update = ConversationUpdateParams(
                conversation_id=info.conversation_id,
                title=p.title,
                add_labels=p.labels,
                expires_in=expires_in,
            )
            await self.organize.update(update)
        if not p.persist:
            # Also expired now: a daemon stopped before the turn ends deletes it later.
            self._tg.start_soon(self._forget, info)

    async def check_attachments(
        self, link: ClientLink, specs: list[str], environment: ClientEnvironment | None
    ) -> None:
        """Read attachment `specs` as a turn would; `InvalidParams` names a bad one."""
        from jpd.core.attachments import conversation_reader, resolve

        renv = self.request_env(link, environment)
        reader = conversation_reader(self.store)
        await resolve(specs, root=renv.root, env=renv.env, conversation_text=reader)

    async def _forget(self, info: TurnInfo) -> None:
        await self.turns.wait_released(info.turn_id)
        try:
            await self.conversations.delete(info.conversation_id)
        except (NotFound, Busy) as exc:  # gone, or continued: the sweep deletes it
            log.info("conversation %s not deleted now: %s", info.conversation_id, exc)

    async def list_conversations(
        self, params: ConversationListParams | None = None
    ) -> list[ConversationSummary]:
        """The conversations `params` selects (default: all but archived, newest first)."""
        return await self.organize.list(params or ConversationListParams())

    async def get_conversation(self, conversation_id: str) -> bytes:
        """The persisted events as one encoded JSON array (protocol.md 5.12)."""
        return await self.conversations.get(conversation_id)

    async def compact_conversation(
        self, link: ClientLink, conversation_id: str, instructions: str | None
    ) -> ConversationCompactResult:
        """Compact a conversation without a running turn now (protocol.md 5.25)."""
        from jpd.core.compact import compact_conversation

        return await compact_conversation(
            self._parts, self.providers, link, conversation_id, instructions
        )

    async def delete_conversation(self, conversation_id: str) -> None:
        """Delete a conversation that has no running turn."""
        await self.conversations.delete(conversation_id)
