"""`elicitation/create` as questions of the tool call that is running (protocol.md 9.7).

A form becomes one question per property of `requestedSchema`, asked in order through
the call's hooks (so through the inquiry router: static answers, turn cache, clients,
the assistant where configured, the detached policy; each recorded with the id
`<call>.<property>.<attempt>`). Questions are exclusive (a server asks the human)
unless config says otherwise; the server's `message` is their context; a property's
`default` is the question's default.

All answered: `accept` with the answers, checked against the property schemas (an
answer that does not fit is asked again, up to `MAX_ATTEMPTS`). The user dismissing
a question: `cancel`. Any other refusal (policy, no client, a failed assistant):
`decline`. URL mode is one boolean question showing the URL: yes is `accept`.
"""

from __future__ import annotations

import datetime
from typing import Any

from mcp import types

from jpd.mcp.model import CallHooks
from jpd.protocol.question import (
    BooleanAnswer,
    MultiSelectAnswer,
    NumberAnswer,
    Question,
    SelectAnswer,
    TextAnswer,
)

MAX_ATTEMPTS = 3
"""Times one property is asked when its answers do not fit its schema."""


def _enum(schema: dict[str, Any]) -> list[str] | None:
    if isinstance(schema.get("enum"), list):
        return [str(v) for v in schema["enum"]]
    choices = schema.get("oneOf") or schema.get("anyOf")
    if isinstance(choices, list) and all(isinstance(c, dict) and "const" in c for c in choices):
        return [str(c["const"]) for c in choices]
    return None


def answer_type_for(schema: dict[str, Any]) -> Any:
    """The answer type of one property schema (protocol.md section 9.7)."""
    kind = schema.get("type")
    if kind == "boolean":
        return BooleanAnswer()
    if kind == "string" and _enum(schema):
        return SelectAnswer(options=_enum(schema) or [])
    if kind in ("number", "integer"):
        low, high = schema.get("minimum"), schema.get("maximum")
        return NumberAnswer(
            minimum=low if _is_number(low) else None,
            maximum=high if _is_number(high) else None,
            integer=kind == "integer",
        )
    items = schema.get("items")
    options = _enum(items) if kind == "array" and isinstance(items, dict) else None
    if options:
        fewest, most = schema.get("minItems"), schema.get("maxItems")
        return MultiSelectAnswer(
            options=options,
            min_items=fewest if isinstance(fewest, int) and fewest <= len(options) else None,
            max_items=most if isinstance(most, int) and most >= 1 else None,
        )
    return TextAnswer()


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def question_for(name: str, schema: dict[str, Any], message: str, required: bool) -> Question:
    """The question asking for property `name`."""
    text = schema.get("description") or schema.get("title") or name
    return Question(
        id=name,
        text=text + ("" if required else " (optional)"),
        context=message,
        answer_type=answer_type_for(schema),
        default=schema.get("default"),
        exclusive=True,
        persistence="turn",
    )


def convert(schema: dict[str, Any], value: Any) -> Any:
    """`value` if it fits the property's schema, else ValueError saying why not."""
    problems = _bounds(schema, value) + _format(schema, value)
    if problems:
        raise ValueError("; ".join(problems))
    return value


def _bounds(schema: dict[str, Any], value: Any) -> list[str]:
    found: list[str] = []
    if isinstance(value, int | float) and not isinstance(value, bool):
        low, high = schema.get("minimum"), schema.get("maximum")
        if isinstance(low, int | float) and value < low:
            found.append(f"must be at least {low}")
        if isinstance(high, int | float) and value > high:
            found.append(f"must be at most {high}")
    if isinstance(value, str):
        shortest, longest = schema.get("minLength"), schema.get("maxLength")
        if isinstance(shortest, int) and len(value) < shortest:
            found.append(f"must have at least {shortest} characters")
        if isinstance(longest, int) and len(value) > longest:
            found.append(f"must have at most {longest} characters")
    if isinstance(value, list):
        fewest, most = schema.get("minItems"), schema.get("maxItems")
        if isinstance(fewest, int) and len(value) < fewest:
            found.append(f"must have at least {fewest} items")
        if isinstance(most, int) and len(value) > most:
            found.append(f"must have at most {most} items")
    return found


def _format(schema: dict[str, Any], value: Any) -> list[str]:
    """The string formats MCP forms may declare (checked loosely)."""
    kind = schema.get("format")
    if not isinstance(value, str) or not isinstance(kind, str):
        return []
    if kind == "email":
        ok = "@" in value.strip("@") and " " not in value
    elif kind == "uri":
        ok = "://" in value or value.startswith(("mailto:", "urn:"))
    elif kind in ("date", "date-time"):
        try:
            parse = datetime.date if kind == "date" else datetime.datetime
            parse.fromisoformat(value)
            ok = True
        except ValueError:
            ok = False
    else:
        ok = True
    return [] if ok else [f"must be a valid {kind}"]


def _refusal(reason: str) -> types.ElicitResult:
    return types.ElicitResult(action="cancel" if reason == "user" else "decline")


async def answer(params: types.ElicitRequestParams, hooks: CallHooks) -> types.ElicitResult:
    """Ask the questions of one elicitation and build the server's answer."""
    if isinstance(params, types.ElicitRequestURLParams):
        question = Question(
            id="url",
            text=f"Open {params.url} and confirm when you are done.",
            context=params.message,
            answer_type=BooleanAnswer(),
            exclusive=True,
            persistence="none",
        )
        asked = await hooks.ask(question)
        if not asked.answered:
            return _refusal(asked.reason)
        return types.ElicitResult(action="accept" if asked.value is True else "decline")

    schema = params.requested_schema
    properties: dict[str, Any] = dict(schema.get("properties") or {})
    required = set(schema.get("required") or [])
    content: dict[str, Any] = {}
    for name, prop in properties.items():
        prop = prop if isinstance(prop, dict) else {}
        question = question_for(name, prop, params.message, name in required)
        for _ in range(MAX_ATTEMPTS):
            asked = await hooks.ask(question)
            if not asked.answered:
                return _refusal(asked.reason)
            if asked.value in ("", None) and name not in required:
                break
            try:
                content[name] = convert(prop, asked.value)
                break
            except ValueError as exc:
                question = question.model_copy(
                    update={"context": f"{params.message}\nThe last answer did not fit: {exc}"}
                )
        else:
            return types.ElicitResult(action="decline")
    return types.ElicitResult(action="accept", content=content)
