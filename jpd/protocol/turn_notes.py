"""`turn/event` notifications as the hub keeps and sends them.

`TurnEventNote` carries its conversation and seq as attributes: the outbox reads them for
every event and client, which must not cost an encoding. `DeltaNote` is a text or reasoning
delta (most of a turn's events, one per token when tokens are far apart) built without a
pydantic model: `DeltaNotes` keeps the JSON of a turn's notifications up to the seq
(`turn_events.delta_head`) and splices the seq and the escaped text in. Its bytes are
exactly `json.dumps` of the `TurnEventParams` model's wire form (compact, ASCII), as for
every other notification (`tests/unit/test_turn_notes.py` checks them against the model).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from json.encoder import encode_basestring_ascii
from typing import Any, Literal

from jpd.protocol.client_port import Notification
from jpd.protocol.method_table import TURN_EVENT
from jpd.protocol.turn_events import DELTA_KIND_HEADS, TurnEventParams, delta_head

DeltaKind = Literal["text_delta", "reasoning_delta"]


class TurnEventNote(Notification):
    """A `turn/event` notification (encoded once, on its first send)."""

    __slots__ = ("conversation_id", "seq")

    def __init__(self, params: TurnEventParams) -> None:
        super().__init__(TURN_EVENT, params)
        self.conversation_id = params.conversation_id
        self.seq = params.seq

    @classmethod
    def filed(cls, wire: dict[str, Any]) -> TurnEventNote:
        """An event dumped before (filed for replay), sent as it is."""
        note = cls.__new__(cls)
        note.method, note._params, note._wire, note._body = TURN_EVENT, None, wire, None
        note.conversation_id, note.seq = wire["conversationId"], wire["seq"]
        return note


class DeltaNote(TurnEventNote):
    """A delta's notification, its body encoded when it is made (see the module doc)."""

    __slots__ = ("kind", "text", "turn_id")

    def __init__(
        self, head: str, conversation_id: str, turn_id: str, seq: int, kind: DeltaKind, text: str
    ) -> None:
        # No `TurnEventNote.__init__`: there is no params model.
        self.method, self._params, self._wire = TURN_EVENT, None, None
        self.conversation_id, self.turn_id, self.seq = conversation_id, turn_id, seq
        self.kind, self.text = kind, text
        # `delta_body`, inlined (once per token).
        self._body = "".join(
            (head, str(seq), DELTA_KIND_HEADS[kind], encode_basestring_ascii(text), "}}}")
        ).encode()

    @property
    def wire(self) -> dict[str, Any]:
        """The params as `TurnEventParams.to_wire` gives them (to file or relay them; not
        kept, so a note stays one small object)."""
        return {
            "conversationId": self.conversation_id,
            "turnId": self.turn_id,
            "seq": self.seq,
            "event": {"kind": self.kind, "text": self.text},
        }


class DeltaNotes:
    """Makes the delta notifications of one turn."""

    __slots__ = ("conversation_id", "note", "turn_id")

    def __init__(self, conversation_id: str, turn_id: str) -> None:
        self.conversation_id = conversation_id
        self.turn_id = turn_id
        head = delta_head(TURN_EVENT.name, conversation_id, turn_id)
        self.note: Callable[[int, DeltaKind, str], DeltaNote] = partial(
            DeltaNote, head, conversation_id, turn_id
        )
        """`note(seq, kind, text)`: a delta's notification (a partial: no frame of its
        own, once per token)."""
