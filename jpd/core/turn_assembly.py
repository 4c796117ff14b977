"""Assembling a turn before it starts (`turn_start`): its provider (the key checked
now), its tools with their coordinator and inquiry backend, its system prompt, and its
place in the event hub. Nothing reaches the disk here."""

from __future__ import annotations

import logging
import secrets
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.lowlevel

from jpd.conversation.paths import SNAPSHOTS_DIR
from jpd.core.parts import DaemonParts
from jpd.core.request_env import RequestEnv
from jpd.llm.registry import ProviderRegistry
from jpd.protocol.errors import ProviderUnavailableError
from jpd.protocol.modes import PermissionMode
from jpd.protocol.turn_requests import ToolToggle

log = logging.getLogger(__name__)

# The config, the turn loop, inquiries and providers load with the first turn
# (protocol.md section 4, "Start-up").
if TYPE_CHECKING:
    from jpd.config import Config
    from jpd.conversation.resume import ResumePlan
    from jpd.core.turn import Turn
    from jpd.llm.base import Provider
    from jpd.llm.history import MessageHistory
    from jpd.llm.registry import ProviderSource
    from jpd.tools.coordinator import Coordinator


def turn_provider(
    registry: ProviderRegistry, cfg: Config, renv: RequestEnv
) -> tuple[ProviderSource, Provider]:
    """The turn's provider (its key checked now), and the providers of side requests."""
    from jpd.llm.errors import ProviderUnavailable

    providers = registry.bound(renv.env)
    try:
        return providers, providers.get(cfg)
    except ProviderUnavailable as exc:
        raise ProviderUnavailableError(exc.message) from exc


async def assemble(
    parts: DaemonParts,
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
    tools = await parts.tools.catalog(cfg, toggles, renv.root)

    def coordinator() -> Coordinator:
        from jpd.inquiry.backend import LlmInquiryBackend

        return parts.tools.coordinator(
            cfg,
            renv,
            tools,
            log=parts.store,
            backend=LlmInquiryBackend(transcript, provider, cfg, providers),
            channel=conversation_id,
            call_id=turn_id,
            detached=detached,
            resume=resume,
            snapshots=parts.store.conversation_dir(conversation_id) / SNAPSHOTS_DIR,
            share_snapshots=share if parts.turns.relay is not None else None,
            mode=mode,
        )

    loop = anyio.lowlevel.current_token()

    def share() -> None:
        """In a fleet, from the tool's thread (blocking it, not the loop): the snapshot
        just kept goes to the store before the tool changes the file, so a member that
        takes over a turn cut mid-tool can undo the change."""
        try:
            anyio.from_thread.run(parts.store.share_blobs, conversation_id, token=loop)
        except Exception as exc:  # shared again after the tool; the change goes on
            log.warning("could not share the snapshots of %s: %s", conversation_id, exc)

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
    from jpd.core.instruction_files import PROMPT_FILES

    # Read in a worker thread only when an instruction file is new or changed.
    prompt = PROMPT_FILES.cached(cfg.assistant, renv.workspace)
    if prompt is None:
        prompt = await anyio.to_thread.run_sync(PROMPT_FILES.load, cfg.assistant, renv.workspace)
    spec.system = prompt.text
    spec.instruction_files = prompt.files
    for problem in prompt.skipped:
        log.warning("conversation %s: instruction file %s", conversation_id, problem)
    if named_now:
        parts.hub.prepare_new(conversation_id)
    else:
        await parts.hub.prepare(conversation_id)  # its seqs go on from its mark
    return Turn(spec, parts.store, parts.hub, datetime.now(UTC))
