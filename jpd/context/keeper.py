"""A conversation's context for one turn (or one `conversation/compact`): counts each
request before it is sent and compacts when it would not fit (protocol.md 12.5).

Tier 1 stubs old tool outputs (no model call); tier 2 folds the older part into a
summary; when no usable summary comes, a `trim` drops the older part deterministically.
Every compaction is one `context_compacted` event handed to `record`, which appends it
to the log and the history; nothing is recorded before the summary is complete, so a
crash or cancellation mid-compaction leaves the conversation as it was.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from jpd.context.count import TokenCount, reported_input
from jpd.context.window import answer_reserve
from jpd.conversation import events as ev
from jpd.llm import base as llm
from jpd.llm.errors import ContextOverflow
from jpd.llm.history import MessageHistory
from jpd.protocol.turn_events import ContextCompactedEvent, ContextUsage
from jpd.protocol.usage import TokenUsage

# Planning a cut and writing a summary load with the first compaction: most turns fit.
if TYPE_CHECKING:
    from jpd.context.summarizer import Summarizer

T = TypeVar("T")

SMALL_WINDOW = 8_192
"""Windows up to this size get the small-context profile (protocol.md 12.5)."""
LEARN_UNSTATED = 0.75
"""The window assumed after a refusal that states none: this share of the refused size."""


@dataclass(frozen=True)
class ContextSettings:
    window: int | None
    """The model's window in tokens; None: unknown, compact only on overflow."""
    reserve: int
    """Tokens kept free for the answer."""
    enabled: bool = True
    compact_at: float = 0.8
    model: str = ""
    """The turn's `<provider>/<model>` (a learned window belongs to it)."""
    max_tokens: int | None = None
    """`assistant.model.parameters.max_tokens` (the reserve follows it)."""

    def narrowed(self, window: int) -> ContextSettings:
        """These settings for a smaller window than configured (one a provider stated)."""
        if self.window is not None and window >= self.window:
            return self
        reserve = answer_reserve(self.max_tokens, window)
        return dataclasses.replace(self, window=window, reserve=reserve)

    @property
    def small(self) -> bool:
        return self.window is not None and self.window <= SMALL_WINDOW

    @property
    def usable(self) -> int | None:
        return None if self.window is None else max(1, self.window - self.reserve)

    @property
    def threshold(self) -> int | None:
        usable = self.usable
        return None if usable is None else int(usable * self.compact_at)


class ContextKeeper:
    """Fits requests into the window by recording compactions."""

    def __init__(
        self,
        settings: ContextSettings,
        count: TokenCount,
        summarizer: Summarizer,
        history: MessageHistory,
        record: Callable[[ev.ContextCompacted], None],
    ) -> None:
        self.settings = settings
        self.count = count
        self._summarizer = summarizer
        self._history = history
        self._record = record
        self.last_used: int | None = None
        """The size of the latest request counted."""
        self._learned: ev.LearnedWindow | None = None
        """A window learned from a refusal, not yet recorded in a compaction."""
        for event in reversed(history.compactions):
            if event.window is not None and event.window.model == settings.model:
                self.settings = settings.narrowed(event.window.tokens)
                break

    def observe(self, request: llm.ModelRequest, usage: TokenUsage) -> ContextUsage | None:
        """Teach the counter the request's true size; how full the window now is."""
        self.count.observe(request, usage)
        prompt = reported_input(usage) or self.last_used
        if self.settings.window is None or prompt is None:
            return None
        return ContextUsage(used=prompt + (usage.output_tokens or 0), window=self.settings.window)

    def rebuild(self, request: llm.ModelRequest) -> llm.ModelRequest:
        """`request` with the history's current messages."""
        return request.model_copy(update={"messages": tuple(self._history.messages())})

    async def fit(self, request: llm.ModelRequest) -> llm.ModelRequest:
        """The request to send: as it is while it fits under the threshold, else after an
        automatic compaction (never when `conversation.context.compact` is false)."""
        s = self.settings
        if not s.enabled or s.threshold is None:
            return request  # nothing to decide: no counting (long logs stay cheap)
        stub_at = s.threshold // 2 if s.small else s.threshold  # small windows stub early
        used = self.last_used = await self.count.count(request, below=stub_at)
        if used <= stub_at:
            return request
        return await self._compact(request, used, "auto", None, summary=used > s.threshold)

    async def send(
        self, request: llm.ModelRequest, send: Callable[[llm.ModelRequest], Awaitable[T]]
    ) -> T:
        """`send(request)`; when the provider refuses it as too long, compact once and
        send once more (a second refusal is the turn's error: never a loop)."""
        try:
            return await send(request)
        except ContextOverflow as exc:
            if not self.settings.enabled:
                raise
            await self._learn(request, exc)
            if await self.compact(request, "overflow") is None:
                raise
        return await send(self.rebuild(request))

    async def _learn(self, request: llm.ModelRequest, refusal: ContextOverflow) -> None:
        """Plan against the window the refusal states, else one well under the refused
        size, when that is smaller than the configured window (protocol.md 12.5)."""
        window = refusal.window
        if window is None:
            refused = refusal.requested or await self.count.count(request)
            window = max(1, int(refused * LEARN_UNSTATED))
        narrowed = self.settings.narrowed(window)
        if narrowed is not self.settings:
            self.settings = narrowed
            self._learned = ev.LearnedWindow(model=self.settings.model, tokens=window)

    async def compact(
        self, request: llm.ModelRequest, trigger: str, instructions: str | None = None
    ) -> ev.ContextCompacted | None:
        """Compact now (`manual`, or `overflow` after the provider refused the request):
        a summary, whatever the count. Returns the event recorded, None if none was
        (nothing to fold, or it would not shrink the context)."""
        used = await self.count.count(request)
        before = len(self._history.compactions)
        await self._compact(request, used, trigger, instructions, summary=True)
        return self._history.compactions[-1] if len(self._history.compactions) > before else None

    async def _compact(
        self,
        request: llm.ModelRequest,
        used: int,
        trigger: str,
        instructions: str | None,
        *,
        summary: bool,
    ) -> llm.ModelRequest:
        from jpd.context.plan import plan_stubs

        s = self.settings
        if trigger == "auto":
            stubs = plan_stubs(self._history.entries(), keep=1 if s.small else 4)
            if stubs is not None:
                used = await self._try(
                    request, used, trigger, method="stub", end_event=stubs.end_event
                )
            if s.threshold is not None and used <= s.threshold:
                return self.rebuild(request)
        if summary:
            await self._fold(request, used, trigger, instructions)
        return self.rebuild(request)

    async def _fold(
        self, request: llm.ModelRequest, used: int, trigger: str, instructions: str | None
    ) -> None:
        from jpd.context.plan import latest_user, plan_cut
        from jpd.context.summary import SummaryFailed, write_summary

        entries = self._history.entries()
        usable = self.settings.usable or used
        cut = plan_cut(entries, tail_budget=usable // 4)
        if cut is None:
            return  # nothing older than the tail: the context cannot shrink this way
        head = entries[: cut.index]
        method = "summary"
        writer = self._summarizer
        if self.settings.window is not None:
            # A learned window may be far smaller than the one the writer was sized for.
            limit = max(200, self.settings.window // 8)
            writer = dataclasses.replace(writer, max_tokens=min(writer.max_tokens, limit))
        model: str | None = writer.model_id
        text: str | None
        try:
            text = await write_summary(writer, request, head, instructions)
        except SummaryFailed:
            method, model = "trim", None
            text = self._carried_summary()
        latest = latest_user(entries)
        if latest is not None and latest[0] < cut.index:
            # The request being answered is never lost in a summary.
            note = f"The user's latest message, verbatim:\n{latest[1]}"
            text = f"{text}\n\n{note}" if text else note
        await self._try(
            request,
            used,
            trigger,
            method=method,
            end_event=cut.end_event,
            summary=text,
            model=model,
            instructions=instructions,
        )

    def _carried_summary(self) -> str | None:
        """The latest summary's text, kept by a trim that replaces it."""
        for event in reversed(self._history.compactions):
            if event.method in ("summary", "trim"):
                return event.summary
        return None

    async def _try(
        self, request: llm.ModelRequest, used: int, trigger: str, **fields: object
    ) -> int:
        """Record the compaction if it shrinks the request; the size afterwards."""
        probe = ev.ContextCompacted(
            trigger=trigger,
            first_event=0,
            tokens_before=used,
            tokens_after=used,
            **fields,
        )
        preview = request.model_copy(update={"messages": tuple(self._history.preview(probe))})
        after = await self.count.count(preview)
        if after >= used:
            return used  # a compaction that would not shrink the context is not recorded
        update: dict[str, object] = {"tokens_after": after}
        if self._learned is not None:
            update["window"], self._learned = self._learned, None
        self._record(probe.model_copy(update=update))
        self.last_used = after
        return after


def compaction_event(event: ev.ContextCompacted) -> ContextCompactedEvent:
    """The turn event that tells attached clients of a recorded compaction."""
    return ContextCompactedEvent(
        trigger=event.trigger,
        method=event.method,
        tokens_before=event.tokens_before,
        tokens_after=event.tokens_after,
        summary=event.summary,
        window=event.window.tokens if event.window is not None else None,
    )
