"""The delta fast path (`jpd.protocol.turn_notes`, `EventHub.delta_sender`) sends exactly
the bytes the pydantic models' serialization gives, for any text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jpd.conversation.replay import ReplayFiles
from jpd.core.hub import EventHub
from jpd.protocol.client_port import Notification
from jpd.protocol.method_table import TURN_EVENT
from jpd.protocol.turn_events import (
    ReasoningDeltaEvent,
    TextDeltaEvent,
    ToolProgress,
    TurnEventParams,
)
from jpd.protocol.turn_notes import DeltaKind, DeltaNote, DeltaNotes, TurnEventNote
from tests.unit.test_hub import FakeLink

TRICKY = [
    "",
    "plain",
    'say "hi"',
    "back\\slash \\n \\u0041 \\",
    "".join(chr(c) for c in range(32)) + "\x7f",
    "tab\tnew\nline\rcr\x0cff\x08bs",
    "naïve café — ünïcödé ✓",
    "日本語のテキスト",
    "emoji 😀 👩‍👩‍👧 🇫🇷",
    "lone \ud800 high, lone \udfff low, pair \ud83d\ude00",
    "\u2028 line and paragraph \u2029 separators",
    "</script><!-- ]]>",
    "\ufeff bom \ufffe \uffff nonchars",
    "x" * 100_000,
]
KINDS: list[DeltaKind] = ["text_delta", "reasoning_delta"]
IDS = [("c-1", "t-1"), ('c"quo\\te', "t\u00e9\n\U0001f600")]


def _model(cid: str, tid: str, seq: int, kind: DeltaKind, text: str) -> TurnEventParams:
    event = TextDeltaEvent(text=text) if kind == "text_delta" else ReasoningDeltaEvent(text=text)
    return TurnEventParams(conversation_id=cid, turn_id=tid, seq=seq, event=event)


def _model_bytes(params: TurnEventParams) -> bytes:
    """What the generic path sends: pydantic's dump of the params (no shortcut of
    `TurnEventParams.to_wire`), encoded as every notification is."""
    wire = params.model_dump(mode="json", by_alias=True, exclude_none=True)
    message = {"jsonrpc": "2.0", "method": TURN_EVENT.name, "params": wire}
    return json.dumps(message, separators=(",", ":")).encode()


@pytest.mark.parametrize("text", TRICKY)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("cid", "tid"), IDS)
def test_a_delta_note_is_the_models_bytes(cid: str, tid: str, kind: DeltaKind, text: str) -> None:
    params = _model(cid, tid, 7, kind, text)
    note = DeltaNotes(cid, tid).note(7, kind, text)
    assert note.body == _model_bytes(params)
    assert note.body == Notification(TURN_EVENT, params).body
    wire = params.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert note.wire == wire and list(note.wire) == list(wire)
    assert (note.conversation_id, note.turn_id, note.seq) == (cid, tid, 7)
    if not any("\ud800" <= c <= "\udfff" for c in text):  # (a JSON reader joins pairs)
        assert json.loads(note.body)["params"] == wire  # it gets the text back
    assert note.body.isascii()  # escaped: no raw control char, no invalid UTF-8


@given(text=st.text(), seq=st.integers(min_value=0, max_value=2**53))
def test_any_text_and_seq(text: str, seq: int) -> None:
    params = _model("c", "t", seq, "text_delta", text)
    assert DeltaNotes("c", "t").note(seq, "text_delta", text).body == _model_bytes(params)


@pytest.mark.parametrize("text", [t for t in TRICKY if "\ud800" not in t])
def test_pydantics_own_json_reads_the_same(text: str) -> None:
    """pydantic's `to_json` (UTF-8, unescaped) differs in bytes but not in what it says."""
    params = _model("c", "t", 1, "text_delta", text)
    note = DeltaNotes("c", "t").note(1, "text_delta", text)
    assert json.loads(note.body)["params"] == json.loads(params.model_dump_json(by_alias=True))


def test_a_filed_event_keeps_its_conversation_and_seq() -> None:
    wire = _model("c", "t", 9, "text_delta", "x").to_wire()
    note = TurnEventNote.filed(wire)
    assert (note.conversation_id, note.seq, note.wire) == ("c", 9, wire)
    assert note.body == _model_bytes(_model("c", "t", 9, "text_delta", "x"))


async def test_the_hub_sends_files_and_replays_deltas_as_the_models(tmp_path: Path) -> None:
    files = ReplayFiles(tmp_path / "replay")
    files.reset()
    hub = EventHub(files)
    live = _BodyLink(1)
    hub.prepare_new("c")  # a new conversation: its seqs start at 1
    hub.subscribe("c", live)
    publish_delta = hub.delta_sender("c", "t")
    for n, text in enumerate(TRICKY[:-1]):
        publish_delta(KINDS[n % 2], text)
    hub.publish("c", "t", TextDeltaEvent(text="via the model"))  # one seq counter for both
    publish_delta("text_delta", "after")
    expected = [
        _model_bytes(_model("c", "t", n + 1, KINDS[n % 2], text))
        for n, text in enumerate(TRICKY[:-1])
    ]
    count = len(expected)
    expected.append(_model_bytes(_model("c", "t", count + 1, "text_delta", "via the model")))
    expected.append(_model_bytes(_model("c", "t", count + 2, "text_delta", "after")))
    assert live.bodies == expected
    assert all(isinstance(n, DeltaNote) for n in list(hub._channels["c"].buffer)[:count])

    hub.unsubscribe("c", live)
    await hub.settle("c")  # filed: read back from the file
    late = _BodyLink(2)
    await hub.attach("c", late, 0)
    assert [json.loads(b) for b in late.bodies] == [json.loads(b) for b in expected]
    assert late.bodies == expected


class _BodyLink(FakeLink):
    def __init__(self, link_id: int) -> None:
        super().__init__(link_id)
        self.bodies: list[bytes] = []

    def send(self, notification: Notification) -> None:
        super().send(notification)
        self.bodies.append(notification.body)


def test_any_event_with_a_lone_surrogate_is_sent_escaped(tmp_path: Path) -> None:
    """Text a provider or a tool decoded from `\\ud800` is not UTF-8: the hub still sizes,
    keeps and sends it (escaped, as JSON allows), instead of failing the turn."""
    files = ReplayFiles(tmp_path / "replay")
    files.reset()
    hub = EventHub(files)
    live = _BodyLink(1)
    hub.subscribe("c", live)
    hub.publish("c", "t", ToolProgress(id="call", progress=1, message="out \ud800 put"))
    hub.delta_sender("c", "t")("text_delta", "lone \udfff")
    assert [b"\\ud800" in live.bodies[0], b"\\udfff" in live.bodies[1]] == [True, True]
    assert live.texts() == ["tool_progress", "lone \udfff"]
