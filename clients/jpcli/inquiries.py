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
        verbs = {
            "deliver": "deliver the result of",
            "sampling": "let the model answer the server of",
        }
        verb = verbs.get(str(permission.get("kind")), "run")
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


EXIT_USAGE = 2


def _answer_type(connection: Connection, inquiry_id: str) -> str | None:
    """The pending inquiry's answer type (`permission` for a permission), if it is listed."""
    result = connection.request("inquiry/list", {})
    for inquiry in (result.get("inquiries") if isinstance(result, dict) else None) or []:
        if isinstance(inquiry, dict) and inquiry.get("inquiryId") == inquiry_id:
            if inquiry.get("kind") == "permission":
                return "permission"
            question = _table(_table(inquiry, "prompt"), "question")
            kind = _table(question, "answerType").get("type")
            return kind if isinstance(kind, str) else None
    return None


def _read_answer(secret: bool, stdin: TextIO, tty: bool, err: TextIO) -> str:
    """The answer from a prompt on the terminal (hidden for a secret), else stdin's first
    line (without its newline)."""
    if tty:
        if secret:
            import getpass

            return getpass.getpass("secret (hidden): ", stream=err)
        err.write("answer: ")
        err.flush()
    line = stdin.readline()
    return line[:-1] if line.endswith("\n") else line


def inquiry_answer(
    connection: Connection,
    inquiry_id: str,
    raw: str | None,
    *,
    remember: bool = False,
    out: TextIO,
    err: TextIO,
    stdin: TextIO | None = None,
    stdin_tty: bool = False,
) -> int:
    """`jp inquiry answer ID [VALUE]`: VALUE is JSON when it parses (`true`, `"x"`, `3`),
    else the string itself; a permission takes `true` (allow) or `false` (deny). Without
    VALUE, the answer is asked on the terminal or read from stdin. A secret is never
    taken from the command line (shell history, `ps`): hidden prompt or stdin only, sent
    as typed.

    Exit 1 with the daemon's reason when it refuses (unknown id, invalid answer).
    """
    kind = _answer_type(connection, inquiry_id)
    secret = kind == "secret"
    if secret and raw is not None:
        err.write(
            f"jp: {inquiry_id} asks for a secret, which is never taken from the command line "
            "(it would stay in shell history and be visible in ps); run without VALUE to "
            "type it hidden, or pipe it on stdin\n"
        )
        return EXIT_USAGE
    if raw is None:
        if stdin is None:
            err.write("jp: no VALUE given and no input to read it from\n")
            return EXIT_USAGE
        text = _read_answer(secret, stdin, stdin_tty, err)
        answer: Any = text if secret or kind in ("text",) else parse_value(text)
    else:
        answer = parse_value(raw)
    params = {"inquiryId": inquiry_id, "answer": answer, "remember": remember}
    try:
        connection.request("inquiry/answer", params)
    except RpcError as exc:
        err.write(f"jp: {exc.message}\n")
        return EXIT_ERROR
    out.write(f"answered {inquiry_id}\n")
    return EXIT_OK
