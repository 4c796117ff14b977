"""`turn/list`'s answer encoded from each turn's and question's JSON, made once each.

With a thousand turns running, encoding the list through pydantic on every `turn/list`
costs milliseconds of the GIL the streaming turns need (and a client may ask every 50 ms).
A running turn's `TurnInfo` is one object for the turn's life (`RunningTurns`), and a
pending question's `PendingInfo` one until it changes (wire models are frozen: a change
is a new object), so the JSON of each is kept, keyed by the object, and the answer is
joined from those pieces. Made so, an answer allocates few objects: the reader thread
that makes it (jpd.rpc.lane) seldom runs a collection itself. The shape is
`TurnListResult`'s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from jpd.protocol.base import WireModel
from jpd.protocol.server_requests import PendingInfo
from jpd.protocol.summaries import TurnInfo
from jpd.rpc.pygls_private import EncodedResult

_Cache = dict[int, tuple[WireModel, bytes]]
_EMPTY = EncodedResult(b'{"turns": [], "inquiries": []}')


class TurnListing:
    """Encodes `turn/list` answers; safe to use from several threads (each call builds a
    new cache and swaps it in whole)."""

    def __init__(self) -> None:
        self._encoded: _Cache = {}
        self._last: tuple[list[WireModel], list[WireModel], EncodedResult] = ([], [], _EMPTY)
        """The last answer and what it listed."""

    def result(self, turns: Sequence[TurnInfo], inquiries: Sequence[PendingInfo]) -> EncodedResult:
        # The same objects as last time (lists compare by identity first, in C): the
        # same answer, not joined again from a thousand pieces.
        listed, pending = list[WireModel](turns), list[WireModel](inquiries)
        last_turns, last_pending, last = self._last
        if listed == last_turns and pending == last_pending:
            return last
        old: _Cache = self._encoded
        new: _Cache = {}
        joined = _join(turns, old, new)
        waiting = _join(inquiries, old, new)
        self._encoded = new
        answer = EncodedResult(
            b"".join((b'{"turns": [', joined, b'], "inquiries": [', waiting, b"]}"))
        )
        self._last = (listed, pending, answer)
        return answer


def _join(models: Sequence[WireModel], old: _Cache, new: _Cache) -> bytes:
    """The models' JSON, comma-separated; each encoded unless `old` has it (kept in
    `new`)."""
    parts = []
    for model in models:
        entry = old.get(id(model))
        if entry is None or entry[0] is not model:  # an id may be reused by a new object
            entry = (model, json.dumps(model.to_wire()).encode())
        new[id(model)] = entry
        parts.append(entry[1])
    return b", ".join(parts)
