"""The ACP bridge's slash commands (jpcli.acp.commands) against a fake daemon link:
the daemon methods they call, with which params, and the messages a failure gives."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jpcli.acp import commands
from jpcli.acp.config_options import Choices
from jpcli.acp.link import LinkClosed, LinkError
from jpcli.rpc import METHOD_NOT_FOUND

EVENTS = [
    {"type": "turn_start", "turn_id": "t-1"},
    {"type": "chat_request", "content": "a"},
    {"type": "turn_end", "turn_id": "t-1", "stop_reason": "end_turn"},
    {"type": "turn_start", "turn_id": "t-2"},
    {"type": "turn_end", "turn_id": "t-2", "stop_reason": "end_turn"},
]


@dataclass
class FakeSession:
    answers: dict[str, Any] = field(default_factory=dict)
    session_id: str = "c-1"
    exists: bool = True
    choices: Choices = field(default_factory=lambda: Choices.from_listing(LISTING))
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    sent: list[Any] = field(default_factory=list)

    async def send(self, updates: list[Any]) -> None:
        self.sent.extend(updates)

    async def daemon_request(self, method: str, params: dict[str, Any]) -> Any:
        self.requests.append((method, params))
        answer = self.answers.get(method, {})
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def said(self) -> str:
        return "".join(
            u.content.text for u in self.sent if u.session_update == "agent_message_chunk"
        )


LISTING = {
    "defaultModel": "test/scripted",
    "aliases": {"big": "anthropic/claude"},
    "providers": [{"name": "test", "available": True}, {"name": "anthropic", "available": True}],
}


async def run(session: FakeSession, text: str) -> str:
    parsed = commands.parse(text)
    assert parsed is not None, text
    await commands.run(session, *parsed)
    return session.said()


def test_only_known_commands_are_commands() -> None:
    assert commands.parse("hello /compact") is None
    assert commands.parse("/compactify") is None
    assert commands.parse("/unknown x") is None
    parsed = commands.parse("  /compact keep the API names ")
    assert parsed is not None and parsed[0].name == "compact" and parsed[1] == "keep the API names"


async def test_compact_calls_the_daemon_with_the_instructions() -> None:
    session = FakeSession()
    assert await run(session, "/compact keep names") == "Compacted the conversation."
    assert session.requests == [
        ("conversation/compact", {"conversationId": "c-1", "instructions": "keep names"})
    ]
    bare = FakeSession()
    await run(bare, "/compact")
    assert bare.requests == [("conversation/compact", {"conversationId": "c-1"})]


async def test_undo_leaves_the_turn_to_the_daemon() -> None:
    session = FakeSession(answers={"turn/undo": {"turnId": "t-1", "restored": [], "removed": []}})
    assert "Undid turn t-1" in await run(session, "/undo")
    assert session.requests == [("turn/undo", {"conversationId": "c-1"})]


async def test_a_daemon_without_the_method_gets_a_clear_message() -> None:
    missing = LinkError(METHOD_NOT_FOUND, "method not found: conversation/compact")
    session = FakeSession(answers={"conversation/compact": missing})
    said = await run(session, "/compact")
    assert "/compact is not available" in said and "`conversation/compact`" in said
    session = FakeSession(answers={"turn/undo": missing})
    assert "no `turn/undo` method" in await run(session, "/undo")


async def test_daemon_errors_and_a_closed_link_are_shown_not_raised() -> None:
    session = FakeSession(answers={"conversation/compact": LinkError(-32005, "a turn is running")})
    assert await run(session, "/compact") == "/compact failed: a turn is running"
    closed = FakeSession(answers={"conversation/compact": LinkClosed("gone")})
    assert "/compact failed" in await run(closed, "/compact")


async def test_nothing_to_do_in_a_conversation_not_yet_created() -> None:
    session = FakeSession(exists=False)
    assert "Nothing to compact" in await run(session, "/compact")
    fresh = FakeSession(exists=False)
    assert "Nothing to undo" in await run(fresh, "/undo")
    assert session.requests == [] and fresh.requests == []


async def test_mode_and_model_change_the_choices_and_tell_the_pickers() -> None:
    session = FakeSession()
    assert "Mode: `read-only`" in await run(session, "/mode read-only")
    assert session.choices.mode == "read-only"
    kinds = [u.session_update for u in session.sent]
    assert kinds[:2] == ["current_mode_update", "config_option_update"]
    model = FakeSession()
    assert "Model: `big`" in await run(model, "/model big")
    assert model.choices.turn_params() == {"mode": "ask", "model": "big"}
    bad = FakeSession()
    assert "unknown model 'nope'" in await run(bad, "/model nope")
    assert bad.choices.model is None


def test_the_effort_goes_to_the_turn_as_a_config_override_for_a_reasoning_model() -> None:
    choices = Choices.from_listing(LISTING)
    choices.set("model", "big")
    choices.set("thought_level", "high")
    choices.set("mode", "auto")
    assert choices.turn_params() == {
        "mode": "auto",
        "model": "big",
        "config": {"assistant": {"reasoning": {"effort": "high"}}},
    }
    choices.set("model", "test/scripted")  # no effort for a model without one
    assert choices.turn_params() == {"mode": "auto"}
