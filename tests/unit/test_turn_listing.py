"""`turn/list`'s answer: joined from each turn's and question's JSON made once, the same
answer while the same objects are listed, and the running turns' list kept until a
turn starts or ends."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

from jpd.core.running_turns import RunningTurns
from jpd.protocol.summaries import TurnInfo
from jpd.rpc.turn_listing import TurnListing

NOW = datetime(2026, 11, 27, 7, 0, tzinfo=UTC)


def test_the_joined_turn_list_answer_is_the_models_own_encoding() -> None:
    from jpd.protocol.turn_requests import TurnListResult

    infos = [
        TurnInfo(turn_id=f"t-{n}", conversation_id=f"c-{n}", model="m/x", started_at=NOW)
        for n in range(3)
    ]
    resumable = TurnInfo(
        turn_id="t-r", conversation_id="c-r", model="m/\u00e9", started_at=NOW, resumable=True
    )
    listing = TurnListing()
    for turns in ([*infos, resumable], [infos[2], resumable], [], [infos[0], infos[0]]):
        encoded = listing.result(turns, [])
        expected = TurnListResult(turns=turns, inquiries=[]).to_wire()
        assert json.loads(encoded.json) == expected


def test_the_joined_answer_lists_questions_as_they_are_now() -> None:
    """A question's JSON is kept while its object lives; a changed question is a new
    object (wire models are frozen), listed as it is now."""
    from jpd.protocol.server_requests import PendingInfo
    from jpd.protocol.turn_requests import TurnListResult

    turn = TurnInfo(turn_id="t-1", conversation_id="c-1", model="m", started_at=NOW)
    asked = [
        PendingInfo(
            inquiry_id=f"i-{n}",
            kind="inquiry",
            conversation_id="c-1",
            turn_id="t-1",
            tool_name="asker",
            deferred=True,
            asked_at=NOW,
        )
        for n in range(3)
    ]
    offered = asked[1].model_copy(update={"deferred": False})
    listing = TurnListing()
    for inquiries in (asked, [asked[0], offered, asked[2]], [offered], []):
        encoded = listing.result([turn], inquiries)
        expected = TurnListResult(turns=[turn], inquiries=inquiries).to_wire()
        assert json.loads(encoded.json) == expected


def test_the_same_objects_listed_again_get_the_same_answer() -> None:
    infos = [
        TurnInfo(turn_id=f"t-{n}", conversation_id=f"c-{n}", model="m/x", started_at=NOW)
        for n in range(3)
    ]
    listing = TurnListing()
    first = listing.result(list(infos), [])
    assert listing.result(list(infos), []) is first
    fourth = TurnInfo(turn_id="t-3", conversation_id="c-3", model="m/x", started_at=NOW)
    changed = listing.result([*infos, fourth], [])
    assert changed is not first
    assert [t["turnId"] for t in json.loads(changed.json)["turns"]] == [
        "t-0",
        "t-1",
        "t-2",
        "t-3",
    ]
    assert json.loads(listing.result([], []).json) == {"turns": [], "inquiries": []}


def _turn(turn_id: str, minute: int) -> Any:
    """What `RunningTurns.run` reads of a turn to list it."""
    started = NOW.replace(minute=minute)
    spec = SimpleNamespace(model_id="m/x")
    return SimpleNamespace(
        turn_id=turn_id, conversation_id=f"c-{turn_id}", spec=spec, started_at=started
    )


def test_the_running_turns_list_is_kept_until_a_turn_starts_or_ends() -> None:
    turns = RunningTurns(cast(Any, None), cast(Any, None), cast(Any, None))
    infos = cast(Any, turns)._infos
    assert turns.running() == []
    from jpd.core.running_turns import turn_info

    def start(turn_id: str, minute: int) -> None:  # as `run` records it
        infos[turn_id] = turn_info(_turn(turn_id, minute))
        cast(Any, turns)._changes += 1

    start("b", 5)
    start("a", 1)
    listed = turns.running()
    assert [t.turn_id for t in listed] == ["a", "b"]  # oldest first
    assert turns.running() is listed
    start("c", 9)
    assert [t.turn_id for t in turns.running()] == ["a", "b", "c"]
