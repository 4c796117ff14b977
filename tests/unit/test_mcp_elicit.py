"""Elicitation forms as questions: answer types, checks, and the server's answer."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import types

from jpd.mcp import elicit
from jpd.mcp.model import Asked
from jpd.protocol.question import Question

SCHEMA = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "env": {"type": "string", "enum": ["a", "b"]},
        "size": {"type": "string", "oneOf": [{"const": "s"}, {"const": "m"}]},
        "count": {"type": "integer", "minimum": 1, "maximum": 9, "default": 2},
        "ratio": {"type": "number"},
        "tags": {"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 2},
        "mail": {"type": "string", "format": "email", "description": "Your address"},
    },
    "required": ["ok", "env"],
}


class Hooks:
    def __init__(self, answers: dict[str, list[Asked]]) -> None:
        self.answers = answers
        self.asked: list[Question] = []

    @property
    def call_id(self) -> str:
        return "c1"

    async def ask(self, question: Question) -> Asked:
        self.asked.append(question)
        return self.answers[question.id].pop(0)

    async def sample(self, request: Any) -> str | None:
        return None

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        pass


def yes(value: Any) -> Asked:
    return Asked(answered=True, value=value)


def form() -> types.ElicitRequestFormParams:
    return types.ElicitRequestFormParams(message="Fill in", requested_schema=SCHEMA)


def test_each_property_type_has_its_answer_type() -> None:
    props = SCHEMA["properties"]
    kinds = {name: elicit.answer_type_for(p).model_dump() for name, p in props.items()}
    assert kinds["ok"] == {"type": "boolean"}
    assert kinds["env"] == {"type": "select", "options": ["a", "b"]}
    assert kinds["size"] == {"type": "select", "options": ["s", "m"]}
    assert kinds["count"] == {"type": "number", "minimum": 1, "maximum": 9, "integer": True}
    assert kinds["ratio"]["type"] == "number" and kinds["ratio"]["integer"] is False
    assert kinds["tags"] == {
        "type": "multi_select",
        "options": ["x", "y"],
        "min_items": None,
        "max_items": 2,
    }
    assert kinds["mail"] == {"type": "text"}
    question = elicit.question_for("mail", props["mail"], "Fill in", required=False)
    assert (question.text, question.context, question.exclusive) == (
        "Your address (optional)",
        "Fill in",
        True,
    )
    assert elicit.question_for("count", props["count"], "m", True).default == 2


async def test_all_answered_accepts_with_content() -> None:
    hooks = Hooks(
        {
            "ok": [yes(True)],
            "env": [yes("b")],
            "size": [yes("m")],
            "count": [yes(3)],
            "ratio": [yes(0.5)],
            "tags": [yes(["x"])],
            "mail": [yes("not an address"), yes("me@example.com")],
        }
    )
    result = await elicit.answer(form(), hooks)
    assert result.action == "accept"
    assert result.content == {
        "ok": True,
        "env": "b",
        "size": "m",
        "count": 3,
        "ratio": 0.5,
        "tags": ["x"],
        "mail": "me@example.com",
    }
    # The answer that did not fit was asked again, saying why.
    retried = [q for q in hooks.asked if q.id == "mail"]
    assert len(retried) == 2 and "must be a valid email" in (retried[1].context or "")


@pytest.mark.parametrize(
    ("reason", "action"), [("user", "cancel"), ("no_prompt_backend", "decline")]
)
async def test_refusals(reason: str, action: str) -> None:
    hooks = Hooks({"ok": [yes(True)], "env": [Asked(answered=False, reason=reason)]})
    result = await elicit.answer(form(), hooks)
    assert (result.action, result.content) == (action, None)
    assert [q.id for q in hooks.asked] == ["ok", "env"]  # nothing asked after a refusal


async def test_empty_optional_answer_is_left_out_and_bad_answers_decline() -> None:
    empty = Hooks({"ok": [yes(False)], "env": [yes("a")], "size": [yes("")]})
    schema = {k: v for k, v in SCHEMA.items() if k != "properties"}
    schema["properties"] = {k: SCHEMA["properties"][k] for k in ("ok", "env", "size")}
    params = types.ElicitRequestFormParams(message="m", requested_schema=schema)
    assert (await elicit.answer(params, empty)).content == {"ok": False, "env": "a"}
    bad = Hooks({"mail": [yes("x"), yes("y"), yes("z")]})
    only_mail = {"type": "object", "properties": {"mail": SCHEMA["properties"]["mail"]}}
    params = types.ElicitRequestFormParams(message="m", requested_schema=only_mail)
    assert (await elicit.answer(params, bad)).action == "decline"


async def test_url_mode_is_a_confirmation() -> None:
    params = types.ElicitRequestURLParams(
        message="Log in", url="https://example.com/x", elicitation_id="e1"
    )
    hooks = Hooks({"url": [yes(True)]})
    assert (await elicit.answer(params, hooks)).action == "accept"
    assert "https://example.com/x" in hooks.asked[0].text
    assert (await elicit.answer(params, Hooks({"url": [yes(False)]}))).action == "decline"
