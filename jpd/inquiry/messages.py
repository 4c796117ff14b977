"""The exact texts the model reads when a question cannot be answered (protocol.md 10.6)."""

from __future__ import annotations


def no_prompt_backend(tool: str) -> str:
    """A human-only question with nobody to ask."""
    return (
        f"{tool} cannot run because no interactive terminal is available. Do not retry this "
        "tool call in this turn; continue without user input or explain what information "
        "is missing."
    )


def assistant_routing_denied(tool: str) -> str:
    """A human-only (exclusive or secret) question configured to go to the assistant."""
    return (
        f"{tool} requires a human answer and cannot be routed to the assistant. Do not retry "
        "this tool call in this turn."
    )


def invalid_static_answer(tool: str, question_id: str, problem: str) -> str:
    """A configured answer that does not fit the question."""
    return (
        f"{tool}: the configured conversation.tools.{tool}.questions.{question_id}.answer value "
        f"does not match the question's answer_type ({problem}). Update the configuration; do "
        "not retry."
    )


def denied_by_policy(tool: str) -> str:
    """The detached policy refused to answer a question."""
    return (
        f"{tool} needs an answer from the user, but nobody is attached to answer it and the "
        "detached policy is `deny`. Do not retry this tool call in this turn; continue without "
        "user input or explain what information is missing."
    )


def no_default(tool: str, question_id: str) -> str:
    """Detached mode `defaults` on a question without a default."""
    return (
        f"{tool} asked question {question_id!r}, which has no default, and nobody is attached "
        "to answer it. Do not retry this tool call in this turn."
    )


def cancelled_by_user(tool: str) -> str:
    """The human dismissed the question."""
    return f"The user cancelled the question asked by {tool}. Do not retry this tool call."


def backend_failed(tool: str, detail: str) -> str:
    """The assistant could not produce a valid answer."""
    return f"{tool}: the question could not be answered by the assistant: {detail}"
