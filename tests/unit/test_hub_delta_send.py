"""The hub's delta publish (`EventHub.delta_sender`), once per token: each subscriber gets
every delta once, in order, whether one or several follow, one leaves while being sent to,
or the replay bounds come from the config on first use."""

from __future__ import annotations

from pathlib import Path

from jpd.conversation.replay import ReplayFiles
from jpd.core.hub import EventHub
from jpd.protocol.client_port import Notification
from jpd.protocol.turn_events import TurnCompleted
from tests.unit.test_hub import CID, FakeLink, make_hub


class LeavingLink(FakeLink):
    """Unsubscribes itself from inside `send` (as a lagging client is detached)."""

    hub: EventHub | None = None

    def send(self, notification: Notification) -> None:
        super().send(notification)
        assert self.hub is not None
        self.hub.unsubscribe(CID, self)


def test_one_subscriber_gets_every_delta_in_order(tmp_path: Path) -> None:
    hub, _ = make_hub(tmp_path)
    link = FakeLink(1)
    hub.subscribe(CID, link)
    publish = hub.delta_sender(CID, "t1")
    for piece in ("a", "b\n", 'c"'):
        publish("text_delta", piece)
    publish("reasoning_delta", "r")
    hub.publish(CID, "t1", TurnCompleted(stop_reason="end_turn"))
    assert link.seqs() == [1, 2, 3, 4, 5]
    assert link.texts() == ["a", "b\n", 'c"', "r", "turn_completed"]
    assert [p["event"]["kind"] for p in link.received[:4]] == ["text_delta"] * 3 + [
        "reasoning_delta"
    ]


def test_several_subscribers_each_get_each_delta_once(tmp_path: Path) -> None:
    hub, _ = make_hub(tmp_path)
    first, second = FakeLink(1), FakeLink(2)
    hub.subscribe(CID, first)
    publish = hub.delta_sender(CID, "t1")
    publish("text_delta", "a")
    hub.subscribe(CID, second)
    publish("text_delta", "b")
    hub.unsubscribe(CID, first)
    publish("text_delta", "c")
    assert first.texts() == ["a", "b"]
    assert second.texts() == ["b", "c"]
    assert second.seqs() == [2, 3]


def test_a_subscriber_leaving_while_sent_to_gets_nothing_more(tmp_path: Path) -> None:
    hub, _ = make_hub(tmp_path)
    leaving, staying = LeavingLink(1), FakeLink(2)
    leaving.hub = hub
    hub.subscribe(CID, leaving)
    publish = hub.delta_sender(CID, "t1")
    publish("text_delta", "a")  # alone: it leaves during the send
    publish("text_delta", "b")
    assert leaving.texts() == ["a"]
    leaving2 = LeavingLink(3)
    leaving2.hub = hub
    hub.subscribe(CID, leaving2)
    hub.subscribe(CID, staying)
    publish("text_delta", "c")  # with another: both get it, the other stays
    publish("text_delta", "d")
    assert leaving2.texts() == ["c"]
    assert staying.texts() == ["c", "d"]


def test_bounds_read_from_the_config_on_first_delta_hold(tmp_path: Path) -> None:
    files = ReplayFiles(tmp_path / "replay")
    files.reset()
    asked: list[str] = []

    def limit() -> int:
        asked.append("limit")
        return 3

    def size() -> int:
        asked.append("bytes")
        return 1 << 20

    hub = EventHub(files, replay_limit=limit, replay_bytes=size)
    hub.prepare_new(CID)  # a new conversation: seqs from 1
    publish = hub.delta_sender(CID, "t1")
    for piece in "abcde":
        publish("text_delta", piece)
    assert asked == ["limit", "bytes"]  # once each
    assert hub.oldest_seq(CID) == 3  # only the last three are kept for replay
