"""Starting a turn (`turn/start`, `turn/resume`): validate the request, assemble the turn
with its provider, history, tools and inquiry backend, and only then take the
conversation (creating a new one) and hand the turn to `RunningTurns`."""

from __future__ import annotations

import dataclasses
import functools
import logging
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from jpd.conversation.paths import SNAPSHOTS_DIR, new_conversation_id
from jpd.conversation.port import ConversationNotFound
from jpd.core.conversations import check_id
from jpd.core.parts import DaemonParts
from jpd.core.request_env import RequestEnv
from jpd.core.running_turns import turn_info
from jpd.llm.registry import ProviderRegistry
from jpd.protocol.client_port import ClientLink
from jpd.protocol.environment import ClientEnvironment
from jpd.protocol.errors import Busy, InvalidParams, NotFound, ProviderUnavailableError
from jpd.protocol.modes import PermissionMode
from jpd.protocol.summaries import TurnInfo
from jpd.protocol.turn_requests import ImageInput, ToolToggle

log = logging.getLogger(__name__)

# The config, the turn loop, inquiries and providers load with the first turn
# (protocol.md section 4, "Start-up").
if TYPE_CHECKING:
    from jpd.config import Config
    from jpd.conversation.port import TurnLease
    from jpd.conversation.resume import ResumePlan
    from jpd.core.prompt_images import PromptImage
    from jpd.core.turn import Turn
    from jpd.core.turn_queue import TurnQueue
    from jpd.llm.base import Provider
    from jpd.llm.history import MessageHistory
    from jpd.llm.registry import ProviderSource
    from jpd.tools.coordinator import Coordinator


class TurnStarter:
    """Starts turns with the daemon's parts, its providers and its task group."""

    def __init__(
        self, parts: DaemonParts, providers: ProviderRegistry, task_group: TaskGroup
    ) -> None:
        self._parts = parts
        self._providers = providers
        self._tg = task_group
        self.queue: TurnQueue | None = None
        """In a fleet: where a turn waits when this member has no room."""

    async def start(
        self,
        link: ClientLink,
        message: str,
        conversation_id: str | None = None,
        model: str | None = None,
        config: Mapping[str, Any] | None = None,
        toggles: list[ToolToggle] | None = None,
        detached: Any = None,
        environment: ClientEnvironment | None = None,
        create: bool = False,
        mode: PermissionMode = "ask",
        images: list[ImageInput] | None = None,
        response_schema: dict[str, Any] | None = None,
        config_files: list[str] | None = None,
        attachments: list[str] | None = None,
        turn_id: str | None = None,
        lease: TurnLease | None = None,
    ) -> TurnInfo:
        """Validate everything, then start the turn as a task and return at once.

        With `create`, `conversation_id` names a conversation to create (protocol.md 5.5).
        In a fleet, a member without room queues the turn instead (`core.turn_queue`);
        the member that claims it starts it here with its `turn_id` and `lease`.
        """
        queue = self.queue if lease is None else None
        if queue is not None:
            await queue.check_store()
        queued = queue is not None and not queue.room()
        if queued:
            from jpd.protocol.turn_requests import TurnStartParams

            # What any member needs to start it (the config before `config_files`).
            request = TurnStartParams(
                message=message,
                conversation_id=conversation_id,
                model=model,
                config=dict(config) if config is not None else None,
                tools=toggles or [],
                detached=detached,
                environment=environment,
                mode=mode,
                images=images or [],
                response_schema=response_schema,
                config_files=config_files or [],
                attachments=attachments or [],
            )
        renv = self._parts.request_env(link, environment)
        if config_files:  # `--cfg`: under this turn's own config, kept as it is
            from jpd.config.merge import deep_merge

            named = await self._parts.configs.named(renv, config_files)
            config = deep_merge(named, config or {})
        history = await self._history(conversation_id, create)
        # The conversation keeps its model and config (RFD 054): they are the layer
        # under this turn's, and its model unless this turn names one.
        from jpd.core.configs import kept_config

        last = history.last_start
        kept = (last.config if last else None) or None
        given_model = bool(
            config and kept_config(None, config).get("assistant", {}).get("model", {}).get("id")
        )
        if model is None and last is not None and last.model and not given_model:
            model = last.model
        cfg = await self._parts.configs.for_turn(renv, config, model, kept=kept)
        from jpd.core import prompt_images

        prompt_images.decode(images or [], cfg.assistant.model.id)  # refused before reading
        providers, provider = self._provider(cfg, renv)
        turn = await self._assemble(
            conversation_id=conversation_id or new_conversation_id(),
            turn_id=turn_id,
            named_now=conversation_id is None,
            message=message,
            cfg=cfg,
            renv=renv,
            providers=providers,
            provider=provider,
            history=history,
            toggles=toggles or [],
            detached=detached,
            mode=mode,
        )
        turn.spec.kept_config = kept_config(kept, config) or None
        attached = await self._attach(
            turn, renv, conversation_id if not create else None, attachments or [], history
        )
        # An image or PDF attached goes as one (a model without them refuses it here).
        pictures = prompt_images.decode([*(images or []), *attached], cfg.assistant.model.id)
        for picture in pictures:
            history.remember_image(picture.ref.file, picture.image)
        turn.spec.images = [picture.ref for picture in pictures]
        if response_schema is not None:
            from jpd.core.structured import check_schema

            check_schema(response_schema)
            turn.spec.response_schema = response_schema
        is_new = conversation_id is None or create
        if queued and queue is not None:
            if is_new:  # listed at once; its lease goes to the queue
                await self._parts.conversations.create_unlocked(turn.conversation_id)
            request = request.model_copy(update={"conversation_id": turn.conversation_id})
            await queue.enqueue(link, turn, request)
            return turn_info(turn)
        await self._launch(turn, link, is_new=is_new, images=pictures, lease=lease)
        from jpd.core.titles import title_model

        if is_new and title_model(cfg) is not None:
            self._tg.start_soon(self._title, turn, cfg, providers)
        return turn_info(turn)

    async def _title(self, turn: Turn, cfg: Config, providers: ProviderSource) -> None:
        """Name a new conversation after its first turn (jpd/core/titles.py)."""
        from jpd.core.titles import first_exchange, write_title

        await self._parts.turns.wait_released(turn.turn_id)
        if turn.stop_reason != "end_turn":
            return
        store, cid = self._parts.store, turn.conversation_id
        try:
            events = await anyio.to_thread.run_sync(store.load, cid)
        except ConversationNotFound:
            return  # deleted meanwhile (--no-persist)
        request, answer = first_exchange(list(events))
        try:
            await write_title(cfg, providers, store, cid, request, answer)
        except (OSError, ConversationNotFound) as exc:  # deleted meanwhile, a full disk
            log.info("no title for %s: %s", cid, exc)

    async def resume(
        self,
        link: ClientLink,
        conversation_id: str,
        turn_id: str,
        detached: Any = None,
        environment: ClientEnvironment | None = None,
        takeover: bool = False,
        lease: TurnLease | None = None,
    ) -> TurnInfo:
        """Continue an interrupted turn under its id (protocol.md 12.4): interrupted tool
        calls run again, a cut output is continued, then the turn goes on as usual.

        `takeover`: this daemon continues a turn another daemon of the fleet left (its
        lease expired): a cut tool whose kind is not read or search stays reported
        interrupted and is not run again (it may have acted already); it holds `lease`."""
        from jpd.conversation.resume import NotResumable, TurnNotFound, plan_resume
        from jpd.llm.base import ToolChoiceAuto

        check_id(conversation_id)
        self._parts.turns.check_idle(conversation_id)
        history = await self._parts.conversations.history(
            conversation_id
        )  # recovers the turn if still open
        try:
            events = await anyio.to_thread.run_sync(
                functools.partial(self._parts.store.load, conversation_id, sanitized=False)
            )
            plan = plan_resume(events, turn_id)
            if takeover:
                from jpd.tools.kinds import tool_kind

                safe = tuple(r for r in plan.rerun if tool_kind(r.name) in ("read", "search"))
                plan = dataclasses.replace(plan, rerun=safe, takeover=True)
        except ConversationNotFound as exc:
            raise NotFound(str(exc)) from exc
        except TurnNotFound:
            raise NotFound(f"conversation {conversation_id} has no turn {turn_id}") from None
        except NotResumable as exc:
            raise InvalidParams(str(exc)) from None
        renv = self._parts.request_env(link, environment)
        last = history.last_start
        kept = (last.config if last else None) or None
        cfg = await self._parts.configs.for_turn(renv, None, plan.model, kept=kept)
        providers, provider = self._provider(cfg, renv)
        turn = await self._assemble(
            conversation_id=conversation_id,
            message="",
            cfg=cfg,
            renv=renv,
            providers=providers,
            provider=provider,
            history=history,
            toggles=[],
            detached=detached,
            resume=plan,
            mode=plan.mode,
        )
        turn.spec.first_tool_choice = ToolChoiceAuto()  # the turn's first call was made
        await self._launch(turn, link, is_new=False, lease=lease)
        return turn_info(turn)

    def _provider(self, cfg: Config, renv: RequestEnv) -> tuple[ProviderSource, Provider]:
        """The turn's provider (its key checked now), and the providers of side requests."""
        from jpd.llm.errors import ProviderUnavailable

        providers = self._providers.bound(renv.env)
        try:
            return providers, providers.get(cfg)
        except ProviderUnavailable as exc:
            raise ProviderUnavailableError(exc.message) from exc

    async def _history(self, conversation_id: str | None, create: bool) -> MessageHistory:
        """The messages a turn continues from (none for a new conversation)."""
        from jpd.llm.history import MessageHistory

        if conversation_id is None:
            if create:
                raise InvalidParams("create needs a conversationId")
            return MessageHistory()
        if create:
            check_id(conversation_id)
            if await anyio.to_thread.run_sync(self._parts.store.exists, conversation_id):
                raise InvalidParams(f"conversation {conversation_id} already exists")
            return MessageHistory()
        self._parts.turns.check_idle(conversation_id)
        return await self._parts.conversations.history(conversation_id)

    async def _assemble(
        self,
        *,
        conversation_id: str,
        message: str,
        cfg: Config,
        renv: RequestEnv,
        providers: ProviderSource,
        provider: Provider,
        history: MessageHistory,
        toggles: list[ToolToggle],
        detached: Any,
        resume: ResumePlan | None = None,
        mode: PermissionMode = "ask",
        named_now: bool = False,
        turn_id: str | None = None,
    ) -> Turn:
        """The turn with its tools and inquiry backend; nothing reaches the disk yet.
        With `resume`, it continues that interrupted turn under its id; `named_now`:
        the conversation is new and its id was made here (no seq mark to read)."""
        from jpd.core.transcript import Transcript
        from jpd.core.turn import Turn
        from jpd.core.turn_setup import turn_spec
        from jpd.tools.deferred import DeferredRunner

        turn_id = resume.turn_id if resume else turn_id or "t-" + secrets.token_hex(6)
        transcript = Transcript(history)
        tools = await self._parts.tools.catalog(cfg, toggles, renv.root)

        def coordinator() -> Coordinator:
            from jpd.inquiry.backend import LlmInquiryBackend

            return self._parts.tools.coordinator(
                cfg,
                renv,
                tools,
                log=self._parts.store,
                backend=LlmInquiryBackend(transcript, provider, cfg, providers),
                channel=conversation_id,
                call_id=turn_id,
                detached=detached,
                resume=resume,
                snapshots=self._parts.store.conversation_dir(conversation_id) / SNAPSHOTS_DIR,
                mode=mode,
            )

        spec = turn_spec(
            cfg,
            conversation_id=conversation_id,
            turn_id=turn_id,
            message=message,
            provider=provider,
            tools=DeferredRunner(tools, coordinator),
            transcript=transcript,
            workspace=str(renv.workspace) if renv.workspace else None,
            providers=providers,
        )
        spec.resume = resume
        spec.mode = mode
        spec.extra_roots = renv.extra_roots
        from jpd.core.instructions import system_prompt

        prompt = await anyio.to_thread.run_sync(system_prompt, cfg.assistant, renv.workspace)
        spec.system = prompt.text
        spec.instruction_files = prompt.files
        for problem in prompt.skipped:
            log.warning("conversation %s: instruction file %s", conversation_id, problem)
        if named_now:
            self._parts.hub.prepare_new(conversation_id)
        else:
            await self._parts.hub.prepare(conversation_id)  # its seqs go on from its mark
        return Turn(spec, self._parts.store, self._parts.hub, datetime.now(UTC))

    async def _launch(
        self,
        turn: Turn,
        link: ClientLink,
        *,
        is_new: bool,
        images: list[PromptImage] | None = None,
        lease: TurnLease | None = None,
    ) -> None:
        """Everything is valid: only now does a new conversation reach the disk."""
        conversation_id = turn.conversation_id
        conversations, turns = self._parts.conversations, self._parts.turns
        if lease is not None:  # claimed from a fleet's queue
            lock = lease
        elif is_new:
            lock = await conversations.create(conversation_id)
        else:
            turns.check_idle(conversation_id)  # again: another turn may have started meanwhile
            lock = await conversations.lock_turn(conversation_id)
        try:
            turns.check_idle(conversation_id)  # and again after the lock's await
        except Busy:
            lock.release()
            raise
        if images:
            from jpd.core import prompt_images

            folder = self._parts.store.conversation_dir(conversation_id)
            try:
                await anyio.to_thread.run_sync(prompt_images.write, folder, images)
            except OSError as exc:
                lock.release()
                raise InvalidParams(f"cannot keep the images: {exc}") from None
            if self._parts.turns.relay is not None:  # a fleet: for a member taking over
                self._tg.start_soon(self._parts.turns.share_blobs, conversation_id)
        if is_new:
            # Durable while the model call runs, not on the way to turn_completed.
            self._tg.start_soon(conversations.sync_entries, conversation_id)
        conversations.remember_history(conversation_id, turn.transcript.history)
        conversations.resumable.pop(conversation_id, None)  # no longer the last turn, or resumed
        turns.run(turn, lock, link)

    async def _attach(
        self,
        turn: Turn,
        renv: RequestEnv,
        conversation_id: str | None,
        given: list[str],
        history: MessageHistory,
    ) -> list[ImageInput]:
        """Read the conversation's attachments (into the system prompt, current content
        each turn) and the message's (into the message, kept in the log); a missing
        file or a failing URL raises `InvalidParams` before anything is sent. Returns
        the images and PDFs among them, to go with the message: a kept one only while
        the model's messages do not already hold that content (sent once, and again
        after it changed or a compaction dropped it)."""
        from jpd.core.attachments import binaries, conversation_reader, render, resolve
        from jpd.llm.base import UserMessage

        kept: list[str] = []
        if conversation_id is not None:
            store = self._parts.store
            found_kept = await anyio.to_thread.run_sync(store.attributes, conversation_id)
            kept = list(found_kept.attachments)
        if not kept and not given:
            return []

        conversation_text = conversation_reader(self._parts.store)
        spec = turn.spec
        found_binaries: list[ImageInput] = []
        if kept:
            found = await resolve(
                kept, root=renv.root, env=renv.env, conversation_text=conversation_text
            )
            text = render(found)
            spec.system = "\n\n".join(part for part in (spec.system, text) if part)
            kept_binaries = binaries(found)
            if kept_binaries:  # the history is walked only when there are any
                sent = {
                    image.data
                    for message in history.messages()
                    if isinstance(message, UserMessage)
                    for image in message.images
                }
                found_binaries += [b for b in kept_binaries if b.data not in sent]
        if given:
            found = await resolve(
                given, root=renv.root, env=renv.env, conversation_text=conversation_text
            )
            text = render(found)
            spec.message = f"{spec.message}\n\n{text}" if text else spec.message
            found_binaries += binaries(found)
        spec.attachments = [*kept, *given]
        return found_binaries
