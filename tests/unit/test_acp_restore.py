"""`jp acp` picks again what a conversation last ran with (load and resume)."""

from __future__ import annotations

from jpcli.acp.config_options import Choices

LISTED = {
    "defaultModel": "test/scripted",
    "providers": [{"name": "test", "available": True}, {"name": "anthropic", "available": True}],
    "aliases": {"big": "anthropic/claude-sonnet-4-5"},
}


def test_model_effort_and_mode_of_the_last_turn_are_restored() -> None:
    choices = Choices.from_listing(LISTED)
    assert choices.current_model == "test/scripted"
    events = [
        {"type": "turn_start", "model": "test/scripted", "mode": "ask"},
        {
            "type": "turn_start",
            "model": "anthropic/claude-sonnet-4-5",
            "mode": "read-only",
            "reasoning_effort": "high",
        },
    ]
    choices.restore(events)
    assert (choices.current_model, choices.effort, choices.mode) == ("big", "high", "read-only")
    assert choices.turn_params()["config"] == {"assistant": {"reasoning": {"effort": "high"}}}


def test_what_the_session_cannot_use_is_left_as_it_is() -> None:
    choices = Choices.from_listing(LISTED)
    choices.restore([{"type": "turn_start", "model": "openai/gpt-5", "reasoning_effort": "low"}])
    assert (choices.current_model, choices.effort) == ("test/scripted", "configured")
    choices.restore([])
    assert choices.mode == "ask"
