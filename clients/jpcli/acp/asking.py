"""The daemon's permission requests and questions, asked in the editor.

- `tool/permission` -> `session/request_permission` with allow once / allow always /
  reject once / reject always. The "always" options name their scope in this session,
  the request's `rememberScope` (the tool, a command prefix such as `run_command: npm
  test`, one protected path): the session remembers the answer under it (and the
  permission kind) and gives it to the daemon's later requests of the same scope
  without asking, and the daemon gets `remember: true` (for the rest of its turn), as
  with the terminal's `Y`/`N`. A request whose `rememberScope` is empty offers no
  "always" option and is never answered from memory.
- `inquiry/prompt` -> an elicitation form when the editor declared form elicitation
  (boolean, select as an enum, text, number, multi-select as an array of an enum; a
  "remember for this turn" box when the question allows it); accept answers, decline
  and cancel dismiss it (-32800). Without forms, a yes/no or select question becomes a
  permission request whose options are the choices; other types are not declared, so
  the daemon's detached policy keeps them. Secrets are never declared (never put in a
  form); the session tells the person where they wait (`Session._watch_questions`).

A choice the editor was not offered is refused to the daemon with -32602 (the
question then goes on without this client), never taken as an answer.
"""

from __future__ import annotations

from typing import Any, Protocol

from acp import RequestError, text_block, tool_content
from acp.schema import (
    AcceptElicitationResponse,
    AllowedOutcome,
    ElicitationBooleanPropertySchema,
    ElicitationFormSessionMode,
    ElicitationIntegerPropertySchema,
    ElicitationMultiSelectPropertySchema,
    ElicitationNumberPropertySchema,
    ElicitationSchema,
    ElicitationStringPropertySchema,
    PermissionOption,
    RequestPermissionResponse,
    StringMultiSelectItems,
    ToolCallUpdate,
)

from jpcli.acp.link import LinkError
from jpcli.acp.toolcalls import CallView
from jpcli.rpc import INVALID_PARAMS, REQUEST_CANCELLED

DISMISSED = LinkError(REQUEST_CANCELLED, "dismissed by the user in the editor")


def permission_options(scope: str | None) -> list[PermissionOption]:
    """The choices of a permission request; the "always" ones name their scope (none
    when an answer to it may not be remembered)."""
    allow = PermissionOption(option_id="allow_once", name="Allow", kind="allow_once")
    reject = PermissionOption(option_id="reject_once", name="Reject", kind="reject_once")
    if scope is None:
        return [allow, reject]
    return [
        allow,
        PermissionOption(
            option_id="allow_always",
            name=f"Always allow {scope} in this session",
            kind="allow_always",
        ),
        reject,
        PermissionOption(
            option_id="reject_always",
            name=f"Always reject {scope} in this session",
            kind="reject_always",
        ),
    ]


_PERMISSION_ANSWERS = {
    "allow_once": (True, False),
    "allow_always": (True, True),
    "reject_once": (False, False),
    "reject_always": (False, True),
}


class EditorPort(Protocol):
    """The part of the ACP connection to the editor that asking needs."""

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> RequestPermissionResponse: ...

    async def create_elicitation(self, message: str, mode: Any) -> Any: ...


def answer_types(forms: bool) -> list[str]:
    """The answer types the bridge declares to the daemon (never `secret`)."""
    if forms:
        return ["boolean", "select", "text", "number", "multi_select"]
    return ["boolean", "select"]


def _chosen(response: RequestPermissionResponse, offered: list[PermissionOption]) -> str:
    """The option id the editor chose; `DISMISSED` when it cancelled."""
    outcome = response.outcome
    if not isinstance(outcome, AllowedOutcome):
        raise DISMISSED
    if outcome.option_id not in {option.option_id for option in offered}:
        raise LinkError(
            INVALID_PARAMS, f"the editor chose option {outcome.option_id!r}, which was not offered"
        )
    return outcome.option_id


async def _ask(
    editor: EditorPort, session_id: str, call: ToolCallUpdate, options: list[PermissionOption]
) -> str:
    try:
        response = await editor.request_permission(session_id, call, options)
    except RequestError as exc:
        # The editor could not ask: this client cannot answer (the question goes on).
        raise LinkError(exc.code, f"the editor refused the request: {exc}") from None
    return _chosen(response, options)


def permission_call(params: dict[str, Any], call_id: str, view: CallView | None) -> ToolCallUpdate:
    """The tool call a permission request shows: the call's own title, kind, locations
    and content (an editor applies these fields to the call's entry), so a command is
    shown whole and an edit with its diff. Sharing a result or sampling says so in the
    content."""
    name, kind = str(params.get("toolName", "tool")), params.get("kind")
    view = view or CallView.of(name, {"arguments": params.get("arguments")})
    content: list[Any] = list(view.diff)
    if kind == "deliver":
        content = [
            tool_content(
                text_block(f"Share this result with the model?\n\n{params.get('content') or ''}")
            )
        ]
    elif kind == "sampling":
        content = [tool_content(text_block(f"Let {name} ask the model for a completion?"))]
    elif isinstance(params.get("content"), str):  # e.g. why a protected path is asked
        content.append(tool_content(text_block(params["content"])))
    return ToolCallUpdate(
        tool_call_id=call_id,
        title=view.title,
        kind=view.kind,
        status="pending",
        content=content or None,
        locations=view.locations or None,
        raw_input=params.get("arguments"),
    )


async def ask_permission(
    editor: EditorPort,
    session_id: str,
    params: dict[str, Any],
    remembered: dict[tuple[str, str], bool] | None = None,
    call: ToolCallUpdate | None = None,
) -> dict[str, Any]:
    """Answer a `tool/permission` request (protocol.md 10.3) by asking the editor, or
    from `remembered` (the session's "always" answers, by permission kind and scope);
    `call` is the tool call to show (`permission_call`)."""
    name, kind = str(params.get("toolName", "tool")), params.get("kind")
    # A daemon that does not name the scope: the tool, as before.
    given = params.get("rememberScope", name)
    scope = str(given) if given else None  # empty: an answer to it is never remembered
    key = (str(kind), scope or "")
    if scope is not None and remembered is not None and key in remembered:
        return {"allow": remembered[key], "remember": True}
    if call is None:
        call = permission_call(params, str(params.get("toolCallId")), None)
    options = permission_options(scope)
    allow, remember = _PERMISSION_ANSWERS[await _ask(editor, session_id, call, options)]
    if remember and scope is not None and remembered is not None:
        remembered[key] = allow
    return {"allow": allow, "remember": remember} if remember else {"allow": allow}


def question_message(params: dict[str, Any]) -> str:
    """The text shown for a question: who asks, its context, the question, the last error."""
    question = params.get("question") or {}
    source = params.get("source") or {}
    asker = params.get("promptLabel") or (
        "Assistant" if source.get("type") == "assistant" else str(params.get("toolName", "tool"))
    )
    parts = [f"{asker} asks:"]
    if question.get("context"):
        parts.append(str(question["context"]))
    parts.append(str(question.get("text", "")))
    if params.get("previousError"):
        parts.append(f"(The previous answer was not accepted: {params['previousError']})")
    return "\n\n".join(parts)


def _answer_property(question: dict[str, Any]) -> Any:
    """The form field of a question's answer (protocol.md 10.1.1)."""
    answer_type = question.get("answerType") or {}
    kind = answer_type.get("type")
    default = question.get("default")
    options = [str(option) for option in answer_type.get("options") or []]
    if kind == "boolean":
        return ElicitationBooleanPropertySchema(
            type="boolean", title="Answer", default=default if isinstance(default, bool) else None
        )
    if kind == "number":
        bounds = {"minimum": answer_type.get("minimum"), "maximum": answer_type.get("maximum")}
        number = default if isinstance(default, int | float) else None
        if answer_type.get("integer"):
            whole = int(number) if number is not None else None
            return ElicitationIntegerPropertySchema(
                type="integer", title="Answer", default=whole, **bounds
            )
        return ElicitationNumberPropertySchema(
            type="number", title="Answer", default=number, **bounds
        )
    if kind == "multi_select":
        return ElicitationMultiSelectPropertySchema(
            type="array",
            title="Answer",
            items=StringMultiSelectItems(type="string", enum=options),
            min_items=answer_type.get("minItems"),
            max_items=answer_type.get("maxItems"),
            default=default if isinstance(default, list) else None,
        )
    return ElicitationStringPropertySchema(
        type="string",
        title="Answer",
        enum=options if kind == "select" else None,
        default=default if isinstance(default, str) else None,
    )


def _answer_schema(question: dict[str, Any]) -> ElicitationSchema:
    properties: dict[str, Any] = {"answer": _answer_property(question)}
    if question.get("persistence") == "turn":
        properties["remember"] = ElicitationBooleanPropertySchema(
            type="boolean", title="Use this answer for the rest of the turn", default=False
        )
    return ElicitationSchema(properties=properties, required=["answer"])


async def ask_question(
    editor: EditorPort,
    session_id: str,
    tool_call_id: str | None,
    params: dict[str, Any],
    *,
    forms: bool,
    call_title: str | None = None,
) -> dict[str, Any]:
    """Answer an `inquiry/prompt` request (protocol.md 10.3) by asking the editor."""
    question = params.get("question") or {}
    kind = (question.get("answerType") or {}).get("type")
    if kind == "secret":
        # Never declared; refuse so the question waits for a terminal (protocol.md 10.7).
        raise LinkError(INVALID_PARAMS, "the editor bridge does not ask for secrets")
    message = question_message(params)
    if forms:
        mode = ElicitationFormSessionMode(
            session_id=session_id,
            tool_call_id=tool_call_id,
            requested_schema=_answer_schema(question),
        )
        try:
            response = await editor.create_elicitation(message, mode)
        except RequestError as exc:
            raise LinkError(exc.code, f"the editor refused the form: {exc}") from None
        if not isinstance(response, AcceptElicitationResponse):
            raise DISMISSED
        content = response.content or {}
        if "answer" not in content:
            raise LinkError(INVALID_PARAMS, "the editor accepted the form without an answer")
        result: dict[str, Any] = {"answer": content["answer"]}
        if content.get("remember") is True:
            result["remember"] = True
        return result
    if kind == "boolean":
        options = [
            PermissionOption(option_id="yes", name="Yes", kind="allow_once"),
            PermissionOption(option_id="no", name="No", kind="reject_once"),
        ]
        values: dict[str, Any] = {"yes": True, "no": False}
    elif kind == "select":
        choices = (question.get("answerType") or {}).get("options") or []
        options = [
            PermissionOption(option_id=f"choice-{i}", name=str(choice), kind="allow_once")
            for i, choice in enumerate(choices)
        ]
        values = {f"choice-{i}": choice for i, choice in enumerate(choices)}
    else:
        raise LinkError(INVALID_PARAMS, f"the editor cannot answer {kind!r} questions")
    # A shown call keeps its title (an editor applies it to the entry); the question is
    # its content. A question of no shown call is an entry of its own, titled by it.
    call = ToolCallUpdate(
        tool_call_id=tool_call_id or str(params.get("inquiryId")),
        title=call_title or message,
        status="pending",
        content=[tool_content(text_block(message))] if call_title else None,
    )
    return {"answer": values[await _ask(editor, session_id, call, options)]}
