"""`jp inquiry ls` and `jp inquiry answer ID VALUE`: questions waiting for a person."""

from __future__ import annotations

import json
from typing import Any, TextIO

from jpcli.overrides import parse_value
from jpcli.render import format_time, one_line
from jpcli.rpc import Connection, RpcError

EXIT_OK = 0
EXIT_ERROR = 1


def _table(parent: dict[str, Any], key: str) -> dict[str, Any]:
    value = parent.get(key)
    return value if isinstance(value, dict) else {}


def describe(inquiry: dict[str, Any]) -> str:
    """What is asked: the question (and its choices) or the permission requested."""
    if inquiry.get("kind") == "permission":
        permission = _table(inquiry, "permission")
        verb = "deliver the result of" if permission.get("kind") == "deliver" else "run"
        return f"permission to {verb} {inquiry.get('toolName', '?')} (answer true or false)"
    question = _table(_table(inquiry, "prompt"), "question")
    answer_type = _table(question, "answerType")
    kind = answer_type.get("type", "?")
    options = answer_type.get("options")
    if isinstance(options, list) and options:
        kind = f"{kind}: {' | '.join(map(str, options))}"
    return f"{one_line(str(question.get('text', '?')), 100)} [{kind}]"


def inquiry_row(inquiry: dict[str, Any]) -> str:
    """`id  tool  question  state` for `jp inquiry ls`."""
    state = "deferred" if inquiry.get("deferred") else "being asked"
    return "  ".join(
        [
            str(inquiry.get("inquiryId", "?")),
            str(inquiry.get("toolName", "?")),
            describe(inquiry),
            f"{state} since {format_time(inquiry.get('askedAt'), seconds=True)}",
        ]
    )


def inquiry_list(connection: Connection, *, out: TextIO, err: TextIO, as_json: bool) -> int:
    """`jp inquiry ls`: pending questions and permission requests, oldest first.

    A deferred one waits for someone (`jp inquiry answer`, or `jp attach` on a
    terminal); one being asked is on some client's screen right now.
    """
    result = connection.request("inquiry/list", {})
    if as_json:
        out.write(json.dumps(result, ensure_ascii=False) + "\n")
        return EXIT_OK
    inquiries = result.get("inquiries") if isinstance(result, dict) else None
    rows = [i for i in inquiries or [] if isinstance(i, dict)]
    if not rows:
        err.write("jp: no pending questions\n")
    for inquiry in rows:
        out.write(inquiry_row(inquiry) + "\n")
    return EXIT_OK


def inquiry_answer(
    connection: Connection,
    inquiry_id: str,
    raw: str,
    *,
    remember: bool = False,
    out: TextIO,
    err: TextIO,
) -> int:
    """`jp inquiry answer ID VALUE`: VALUE is JSON when it parses (`true`, `"x"`, `3`),
    else the string itself; a permission takes `true` (allow) or `false` (deny).

    Exit 1 with the daemon's reason when it refuses (unknown id, invalid answer).
    """
    params = {"inquiryId": inquiry_id, "answer": parse_value(raw), "remember": remember}
    try:
        connection.request("inquiry/answer", params)
    except RpcError as exc:
        err.write(f"jp: {exc.message}\n")
        return EXIT_ERROR
    out.write(f"answered {inquiry_id}\n")
    return EXIT_OK
