"""The storage port under the conversation layer: what the daemon asks of a store.

Two implementations: `jpd.conversation.jsonl` (the embedded default: a directory of
JSONL files per conversation, a `flock` per running turn) and `jpd.conversation.pg`
(Postgres, for daemons that share conversations; imported only when configured, see
`jpd.conversation.open_store`). Both keep the same log semantics: events are only ever
appended, in order; `sync` makes them durable; recovery (`jpd.conversation.recovery`)
reads the log to close a turn its daemon left open.

The methods that wait on I/O are coroutines, awaited on the daemon's event loop: the
JSONL store does its file work in a worker thread (one hop per call,
`jpd.conversation.jsonl.threaded`), the Postgres store awaits psycopg's async API on a
`psycopg_pool.AsyncConnectionPool` (docs/scale.md section 4). `append` stays a plain
call: it is on the path of every recorded event and must never wait (the JSONL store
writes a line to the OS, the Postgres store queues it for its writer; `sync` and
`CommitMarks` say when it is durable or committed). Pure accessors stay plain too.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from jpd.conversation.attributes import Attributes
from jpd.conversation.events import Event, TurnStart
from jpd.conversation.metadata import ConversationMeta


class ConversationNotFound(KeyError):
    """No conversation with this id exists in the store."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__(conversation_id)
        self.conversation_id = conversation_id

    def __str__(self) -> str:
        return f"conversation not found: {self.conversation_id}"


class ConversationExists(FileExistsError):
    """`create` was called for an id that already has a log."""


class ConversationBusy(RuntimeError):
    """Another daemon holds the conversation's turn lease (it runs a turn there)."""


class StoreUnreachable(ConnectionError):
    """A shared store (a fleet's database) could not be reached within the time a
    request may wait for it."""


class LeaseLost(RuntimeError):
    """This daemon no longer holds the conversation's turn lease: another daemon took it
    over (a newer epoch), or it could not renew it in time. Nothing more is written."""

    def __init__(self, conversation_id: str, detail: str = "") -> None:
        super().__init__(conversation_id)
        self.conversation_id = conversation_id
        self.detail = detail

    def __str__(self) -> str:
        more = f": {self.detail}" if self.detail else ""
        return f"turn lease of conversation {self.conversation_id} lost{more}"


class TurnLease(Protocol):
    """The right to write a conversation's turn, held while it runs (one writer)."""

    async def release(self) -> None:
        """Give it back (idempotent)."""

    def on_lost(self, callback: Callable[[], None]) -> None:
        """Call `callback` (on the event loop) if the lease is lost while held; a lease
        that cannot be lost (a `flock`) never calls it."""

    @property
    def seq_floor(self) -> int | None:
        """In a fleet: the lowest `turn/event` seq the holder may send (every member's
        earlier seqs are below it); None: seqs are this daemon's alone."""

    def track_seqs(self, next_seq: Callable[[], int]) -> None:
        """In a fleet: `next_seq()` is the holder's next seq, recorded in the store while
        the lease is held and when it is released (called on the event loop)."""


class QuestionBoard(Protocol):
    """Questions pending in one daemon of a fleet, answerable from any (see
    `jpd.conversation.pg.questions`). Keys are (conversation, turn, inquiry) ids."""

    async def post(self, key: tuple[str, str, str], info_json: str) -> None:
        """Offer this daemon's question to the others (`PendingInfo` as JSON)."""

    async def withdraw(self, key: tuple[str, str, str]) -> None:
        """The question was resolved or ended here."""

    async def others(self) -> builtins.list[str]:
        """Unanswered questions other daemons wait on, as posted."""

    async def answer(
        self,
        inquiry_id: str,
        conversation_id: str | None,
        turn_id: str | None,
        value: Any,
        remember: bool,
        by: str,
    ) -> Literal["answered", "already", "missing", "ambiguous"]:
        """Answer another daemon's question; the first answer stored wins."""

    async def answers(self) -> builtins.list[tuple[tuple[str, str, str], Any, bool, str]]:
        """Answers stored for this daemon's questions: (key, value, remember, by)."""

    async def reopen(self, key: tuple[str, str, str], by: str) -> None:
        """Clear an answer found invalid, so that the question waits on."""

    # Asking the clients of other daemons (see `jpd.conversation.pg.prompts`).

    async def watch(self, rows: builtins.list[tuple[str, int, str]]) -> None:
        """This daemon's clients able to answer, by conversation subscribed to:
        (conversation, link id, capabilities as JSON), replacing (and renewing) the
        earlier ones."""

    async def watchers(
        self, conversation_ids: builtins.list[str]
    ) -> builtins.list[tuple[str, str, int, str]]:
        """Other daemons' live such clients of these conversations: (conversation,
        daemon, link id, capabilities as JSON)."""

    async def relay(self, member: str, link_id: int, method: str, params: str) -> int:
        """Send a request or notification (params as JSON) to a client of another
        daemon; returns its id."""

    async def relayed(self) -> builtins.list[tuple[int, int, str, str]]:
        """What was sent to this daemon's clients and awaits a reply: (id, link id,
        method, params)."""

    async def reply(self, relayed_id: int, body: str | None) -> None:
        """Store a client's reply (None: a notification was delivered, forget it)."""

    async def replies(self, ids: builtins.list[int]) -> dict[int, str]:
        """The replies stored for this daemon's relayed requests among `ids`."""

    async def drop(self, ids: builtins.list[int]) -> None:
        """Forget this daemon's relayed requests."""


class TurnStream(Protocol):
    """The live events of turns running on other daemons of a fleet (see
    `jpd.conversation.pg.stream`). Bodies are `turn/event` params as sent on the wire."""

    async def publish(self, conversation_id: str, turn_id: str, bodies: builtins.list[str]) -> None:
        """Add a batch of this daemon's events of a turn, and wake the followers."""

    async def publish_all(self, batches: dict[tuple[str, str], builtins.list[str]]) -> None:
        """`publish` of several (conversation, turn) batches at once."""

    async def read(self, conversation_id: str, after: int) -> builtins.list[tuple[int, str]]:
        """Other daemons' events after position `after`: (position, body)."""

    async def read_all(self, cursors: dict[str, int]) -> dict[str, builtins.list[tuple[int, str]]]:
        """`read` of several conversations (id -> position) at once."""

    async def follow(self, conversation_id: str) -> None:
        """Be woken by `wait` when the conversation has new events."""

    def unfollow(self, conversation_id: str) -> None:
        """No more wake-ups for it."""

    async def wait(self, timeout: float) -> set[str]:  # noqa: ASYNC109 - a bound, not a deadline
        """Block up to `timeout` seconds; the followed conversations with new events."""


@dataclass(frozen=True)
class QueueClaim:
    """A turn this member claimed from a fleet's queue, with its conversation's lease:
    a queued turn (`request`: its `turn/start` params as JSON) to start here, or (no
    `request`) an open turn whose member stopped, to take over."""

    conversation_id: str
    turn_id: str
    lease: TurnLease
    model: str
    workspace: str | None
    request: str | None = None


class TurnQueueStore(Protocol):
    """Where a fleet's turns wait for a member with room (see
    `jpd.conversation.pg.queue`); one claim path for queued and taken-over turns."""

    async def enqueue(
        self,
        conversation_id: str,
        turn_id: str,
        *,
        request: str,
        model: str,
        workspace: str | None,
        pinned: bool,
    ) -> bool:
        """Queue a turn (its `turn/start` params as JSON), holding its conversation for
        it; `pinned`: only members of this host may run it. False: a turn runs or
        waits in the conversation already."""

    async def claim(
        self, turn_id: str | None = None, *, takeover: bool = True
    ) -> QueueClaim | None:
        """The oldest queued turn this member may run, else (`takeover`) an open turn
        whose lease expired, claimed with its lease; with `turn_id`, that queued turn
        whatever its host. None: nothing to claim."""

    async def ask_cancel(self, turn_id: str) -> bool:
        """Ask the member that runs or claims this turn to cancel it; False: no such
        turn is queued or running."""

    async def cancels(self) -> builtins.list[str]:
        """Turn ids whose cancellation was asked and not yet done."""

    async def cancelled(self, turn_id: str) -> None:
        """The cancellation of `turn_id` was done (or is moot)."""

    async def queued(self) -> builtins.list[tuple[str, str, str, datetime]]:
        """Turns waiting: (conversation id, turn id, model, queued at), oldest first."""

    async def wait(self, timeout: float) -> bool:  # noqa: ASYNC109 - a bound, not a deadline
        """Block up to `timeout` seconds for news of the queue; True if some came."""

    async def check(self) -> None:
        """Raise `StoreUnreachable` unless the store answers within a few seconds."""


@runtime_checkable
class CommitMarks(Protocol):
    """A store whose appends are committed after `append` returns (a fleet's): each
    has a mark, and the daemon can wait until they are committed."""

    def unwritten(self, conversation_id: str) -> int | None:
        """The mark of the conversation's newest append not yet committed; None: all
        are (or none will be: its writes stopped)."""

    def when_written(
        self, conversation_id: str, mark: int, callback: Callable[[int, bool], None]
    ) -> None:
        """`callback(done, ok)` (from any thread) once the appends up to `mark` are
        committed (ok), or the writes stopped at `done` short of it (not ok)."""


@runtime_checkable
class SharedLog(Protocol):
    """A store whose conversations other daemons write too (a fleet's)."""

    async def unchanged_since_mine(self, conversation_id: str) -> bool:
        """Whether nobody else took the conversation's turn lease since this daemon's
        last one there was released (so what it kept of the conversation is current)."""


@runtime_checkable
class QueueingStorage(Protocol):
    """A store with a turn queue (a fleet's)."""

    def turn_queue(self) -> TurnQueueStore:
        """The fleet's turn queue."""


class ConversationStorage(Protocol):
    """Conversations: their event logs, summaries, turn leases and blob directories."""

    @property
    def root(self) -> Path:
        """The local data dir (blobs, replay files)."""

    async def open(self) -> None:
        """Make the store ready (a fleet's: its pool connected and its schema migrated);
        idempotent, and done by the first call that needs it otherwise."""

    @property
    def takeover_interval(self) -> float | None:
        """Seconds between scans for turns whose holder stopped renewing its lease (a
        fleet's store); None: a lease dies with its process (`flock`), nothing to scan."""

    async def create(self, conversation_id: str) -> None:
        """Create an empty conversation; raise `ConversationExists` if it has a log."""

    async def exists(self, conversation_id: str) -> bool:
        """Whether the conversation has a log."""

    def append(self, conversation_id: str, event: Event) -> None:
        """Append one event (visible to readers at once, durable after `sync`); called
        on the event loop or from one of its worker threads (a tool's file change).

        Raises `ConversationNotFound`, or `LeaseLost` when a lease-holding store no
        longer holds the conversation's turn lease.
        """

    async def sync(self, conversation_id: str) -> None:
        """Make every appended event durable."""

    async def sync_entries(self, conversation_id: str) -> None:
        """Make a created conversation itself durable, ahead of its first `sync`."""

    async def sync_entries_many(self, conversation_ids: builtins.list[str]) -> dict[str, Exception]:
        """`sync_entries` of several conversations at once (turns started together);
        the error of each that failed, by id."""

    async def load(self, conversation_id: str, *, sanitized: bool = True) -> builtins.list[Event]:
        """All events, oldest first (passed through `sanitize` unless told not to)."""

    async def load_encoded(self, conversation_id: str) -> bytes:
        """The sanitized events as one JSON array, each in its stored form."""

    async def delete(self, conversation_id: str) -> None:
        """Remove a conversation; raise `ConversationNotFound` if absent, and
        `ConversationBusy` if another daemon runs a turn in it."""

    async def metadata(self, conversation_id: str) -> ConversationMeta:
        """The conversation's summary."""

    async def list(self) -> builtins.list[ConversationMeta]:
        """Every conversation's summary, most recently updated first."""

    async def release(self, conversation_id: str) -> None:
        """The conversation went idle: drop what is kept in memory for it."""

    async def close(self) -> None:
        """Make everything durable and close what is open (the store stays usable)."""

    async def attributes(self, conversation_id: str) -> Attributes:
        """What a user (or the title model) said about the conversation: title, labels,
        archived, pinned, kept attachments, expiry (the defaults when nothing)."""

    async def update_attributes(
        self, conversation_id: str, change: Callable[[Attributes], Attributes]
    ) -> Attributes:
        """Apply `change` to the attributes and store the result, atomically against
        other changes (of this daemon, or of any member of a fleet)."""

    async def all_attributes(self) -> dict[str, Attributes]:
        """The attributes of every conversation that has any, by id."""

    def conversation_dir(self, conversation_id: str) -> Path:
        """The local directory of a conversation's blobs (file snapshots, images)."""

    async def share_blobs(self, conversation_id: str) -> None:
        """Make the blobs written here readable by the other daemons of a fleet."""

    async def fetch_blobs(self, conversation_id: str) -> None:
        """Bring here the blobs other daemons of a fleet wrote (before reading them)."""

    async def lock_turn(self, conversation_id: str) -> TurnLease | None:
        """Take the conversation's turn lease; None if a live holder has it. Raises
        `ConversationNotFound` if the conversation does not exist."""

    async def last_turn(self, conversation_id: str) -> tuple[bool, TurnStart | None]:
        """(open, resumable start) of the conversation's last turn: open when it has no
        `turn_end` after its start (or latest `turn_resume`); the start when it ended
        `interrupted`. (False, None) for a conversation without a turn or log."""

    def question_board(self) -> QuestionBoard | None:
        """Where questions are shared with other daemons; None: not in a fleet."""

    async def turns_elsewhere(self) -> builtins.list[tuple[str, TurnStart]]:
        """Turns other daemons of a fleet run now (a live lease): (conversation id, its
        `turn_start`); [] outside a fleet."""

    def limits_model_calls(self, provider: str) -> bool:
        """Whether calls to `provider` wait for a slot of a fleet-wide limit."""

    async def model_slot(self, provider: str) -> Callable[[], Awaitable[None]] | None:
        """Wait until a slot of `provider`'s limit is held, and return how to give it
        back; None: no slot held (no limit, or the store is away). A cancelled wait
        holds nothing."""

    def turn_stream(self) -> TurnStream | None:
        """Where turns' live events are shared with other daemons; None: not a fleet."""

    async def scan_turns(self) -> builtins.list[tuple[str, bool, TurnStart | None]]:
        """`last_turn` of every conversation, as (id, open, resumable start): the
        start-up scan that finds turns to recover and to offer for resuming."""
