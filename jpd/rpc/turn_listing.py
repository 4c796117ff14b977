"""`turn/list`'s answer encoded from each turn's JSON, made once per turn.

With a thousand turns running, encoding the list through pydantic on every `turn/list`
costs milliseconds of the GIL the streaming turns need (and a client may ask every 50 ms).
A running turn's `TurnInfo` is one object for the turn's life (`RunningTurns`), so its
JSON is kept, keyed by the object, and the answer is joined from those pieces. The shape
is `TurnListResult`'s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from jpd.protocol.server_requests import PendingInfo
from jpd.protocol.summaries import TurnInfo
from jpd.rpc.pygls_private import EncodedResult


class TurnListing:
    """Encodes `turn/list` answers; safe to use from several threads (each call builds a
    new cache and swaps it in whole)."""

    def __init__(self) -> None:
        self._encoded: dict[int, tuple[TurnInfo, bytes]] = {}

    def result(self, turns: Sequence[TurnInfo], inquiries: Sequence[PendingInfo]) -> EncodedResult:
        old = self._encoded
        new: dict[int, tuple[TurnInfo, bytes]] = {}
        for info in turns:
            entry = old.get(id(info))
            if entry is None or entry[0] is not info:  # an id may be reused by a new object
                entry = (info, json.dumps(info.to_wire()).encode())
            new[id(info)] = entry
        self._encoded = new
        pending = json.dumps([i.to_wire() for i in inquiries]).encode()
        listed = b", ".join(new[id(info)][1] for info in turns)
        return EncodedResult(b"".join((b'{"turns": [', listed, b'], "inquiries": ', pending, b"}")))
