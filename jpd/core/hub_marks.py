"""Where each conversation's seqs go on, for the event hub (`jpd.core.hub`).

A conversation without a channel (idle) is known by (next seq, oldest seq of its replay
file or None), read from its seq mark the first time in this run (`ReplayFiles.read_mark`).
Its channel's seqs are reserved on disk in blocks before they are sent, and its exact
mark is written when it goes idle again (protocol.md section 7.2). A conversation named
here has no mark until it goes idle or reaches the end of its first block: a later run
finding none starts above that block (`UNMARKED_NEXT`).
"""

from __future__ import annotations

import logging

import anyio

from jpd.conversation.replay import RESERVE_BLOCK, UNMARKED_NEXT, ReplayFiles
from jpd.core.hub_channel import Channel

log = logging.getLogger(__name__)

IdleState = tuple[int, int | None]
"""(next seq, oldest seq of the replay file that continues up to it, or None)."""


class SeqMarks:
    """The idle conversations' states and the marks on disk behind them."""

    def __init__(self, files: ReplayFiles) -> None:
        self.files = files
        self.idle: dict[str, IdleState] = {}
        self.fresh: set[str] = set()
        """Conversations named here that have never been filed: no replay file, and no
        mark that vouches for one (`ReplayFiles.write`'s `fresh`)."""
        self.unmarked: set[str] = set()
        """Conversations named here that have no mark on disk: their first block needs
        none (a later run starts above it), so their first event creates no file."""

    def state(self, conversation_id: str) -> IdleState:
        """The state of a conversation without a channel, read from its mark the first
        time in this run (`refresh` does that off the event loop)."""
        state = self.idle.get(conversation_id)
        if state is None:
            state = self.idle[conversation_id] = self._load(conversation_id)
        return state

    def take(self, conversation_id: str) -> IdleState:
        """The state of a conversation that gets a channel now (no longer idle)."""
        state = self.state(conversation_id)
        del self.idle[conversation_id]
        return state

    def _load(self, conversation_id: str) -> IdleState:
        next_seq, replay_from = self.files.read_mark(conversation_id)
        if replay_from is None:
            # The file (if any) does not reach the mark: its tail died with a daemon.
            self.files.forget(conversation_id)
        return next_seq, replay_from

    def name_new(self, conversation_id: str) -> None:
        """A conversation this daemon has just named: no mark to read (its seqs start at
        1), and no file is touched before its first turn starts."""
        self.idle[conversation_id] = (1, None)
        self.fresh.add(conversation_id)
        self.unmarked.add(conversation_id)

    def open(self, conversation_id: str, channel: Channel) -> None:
        """A channel was made for the conversation: an unmarked one has its first block
        reserved already (by having no mark)."""
        if conversation_id in self.unmarked:
            channel.reserved = max(channel.reserved, UNMARKED_NEXT)

    async def refresh(self, conversation_id: str) -> IdleState:
        """Read a conversation's mark in a worker thread. An idle conversation's mark is
        read again: a private daemon (`jp --stdio`) on the same data dir may have run a
        turn in it meanwhile, and seqs must still only grow."""
        cached = self.idle.get(conversation_id)
        if cached is None:
            return await anyio.to_thread.run_sync(self._load, conversation_id)
        if conversation_id in self.unmarked:
            mark = await anyio.to_thread.run_sync(self.files.mark, conversation_id)
            if mark is None:
                return cached  # still named here only: its first block stays unmarked
            # Another daemon on this data dir wrote one: reserve as for any conversation.
            self.unmarked.discard(conversation_id)
            return cached if mark[0] <= cached[0] else mark
        state = await anyio.to_thread.run_sync(self.files.read_mark, conversation_id)
        return cached if state[0] <= cached[0] else state

    def reserve(self, conversation_id: str, channel: Channel) -> None:
        """Cover the channel's next `RESERVE_BLOCK` seqs by its mark."""
        # Written before the seq is sent; a tiny write once per block, on the loop so that
        # no seq can go out ahead of its mark.
        reserved = channel.next_seq + RESERVE_BLOCK
        try:
            self.files.write_mark(conversation_id, reserved, None)
        except OSError as exc:
            log.warning("could not write the seq mark of %s: %s", conversation_id, exc)
        else:
            self.unmarked.discard(conversation_id)
        channel.reserved = reserved

    def go_idle(self, conversation_id: str, channel: Channel) -> bool:
        """Write the exact mark of a channel whose events are all filed; whether it did
        (the channel may go)."""
        try:
            self.files.write_mark(conversation_id, channel.next_seq, channel.filed_from)
        except OSError as exc:
            log.warning("could not write the seq mark of %s: %s", conversation_id, exc)
            return False
        self.unmarked.discard(conversation_id)
        self.idle[conversation_id] = (channel.next_seq, channel.filed_from)
        return True

    def forget(self, conversation_id: str) -> None:
        """A deleted conversation."""
        self.idle.pop(conversation_id, None)
        self.fresh.discard(conversation_id)
        self.unmarked.discard(conversation_id)
