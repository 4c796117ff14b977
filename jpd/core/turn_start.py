"""Starting a turn (`turn/start`, `turn/resume`): validate the request, assemble the turn
(`turn_assembly`) with its history (`turn_conversation`) and attachments
(`turn_attachments`), and only then take the conversation (creating a new one) and hand
the turn to `RunningTurns` (`turn_conversation.launch`), or, on a fleet member without
room, queue it (`turn_enqueue`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from anyio.abc import TaskGroup

from jpd.conversation.paths import new_conversation_id
from jpd.conversation.port import ConversationNotFound
from jpd.core.conversations import check_id
from jpd.core.parts import DaemonParts
from jpd.core.turn_assembly import assemble, turn_provider
from jpd.core.turn_attachments import attach
from jpd.core.turn_conversation import launch, start_history
from jpd.core.turn_enqueue import enqueue, queued_request
from jpd.llm.registry import ProviderRegistry
from jpd.protocol.client_port import ClientLink
from jpd.protocol.environment import ClientEnvironment
from jpd.protocol.errors import InvalidParams, NotFound
from jpd.protocol.modes import PermissionMode
from jpd.protocol.summaries import TurnInfo
from jpd.protocol.turn_requests import ImageInput, ToolToggle

# The config, the turn loop, inquiries and providers load with the first turn
# (protocol.md section 4, "Start-up").
if TYPE_CHECKING:
    from jpd.conversation.port import TurnLease
    from jpd.core.turn_queue import TurnQueue


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
            request = queued_request(
                message=message,
                conversation_id=conversation_id,
                model=model,
                config=config,
                toggles=toggles,
                detached=detached,
                environment=environment,
                mode=mode,
                images=images,
                response_schema=response_schema,
                config_files=config_files,
                attachments=attachments,
            )
        renv = self._parts.request_env(link, environment)
        if config_files:  # `--cfg`: under this turn's own config, kept as it is
            from jpd.config.merge import deep_merge

            named = await self._parts.configs.named(renv, config_files)
            config = deep_merge(named, config or {})
        history = await start_history(self._parts, conversation_id, create)
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
        providers, provider = turn_provider(self._providers, cfg, renv)
        turn = await assemble(
            self._parts,
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
        attached = await attach(
            self._parts,
            turn,
            renv,
            conversation_id if not create else None,
            attachments or [],
            history,
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
            return await enqueue(self._parts, queue, link, turn, request, is_new=is_new)
        await launch(self._parts, self._tg, turn, link, is_new=is_new, images=pictures, lease=lease)
        from jpd.core.titles import title_after_first_turn, title_model

        # A turn claimed from a fleet's queue (`lease`) is its conversation's first when
        # nothing came before it (the member that queued it created it empty).
        first = is_new or (lease is not None and history.last_start is None)
        if first and title_model(cfg) is not None:
            self._tg.start_soon(title_after_first_turn, self._parts, turn, cfg, providers)
        return self._parts.turns.info(turn)

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
            events = await self._parts.store.load(conversation_id, sanitized=False)
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
        providers, provider = turn_provider(self._providers, cfg, renv)
        turn = await assemble(
            self._parts,
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
        await launch(self._parts, self._tg, turn, link, is_new=False, lease=lease)
        return self._parts.turns.info(turn)
