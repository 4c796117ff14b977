"""The `answer_inquiry` tool: how the model answers a tool's question (protocol.md 10.4).

Its name and definition live here, apart from the backend that runs the side request,
because the tool coordinator offers the tool in every turn with tools and routes its
calls; the coordinator needs the name, not the backend.
"""

from __future__ import annotations

from jpd.llm import base as llm

ANSWER_INQUIRY = "answer_inquiry"

ANSWER_INQUIRY_TOOL = llm.ToolDefinition(
    name=ANSWER_INQUIRY,
    description=(
        "Answer a question from a tool that needs additional input. Call this tool when "
        "the system indicates a tool requires your input. Use the inquiry_id from the "
        "question and provide your answer as a JSON string."
    ),
    parameters={
        "type": "object",
        "properties": {
            "inquiry_id": {
                "type": "string",
                "description": "The inquiry ID from the question prompt.",
            },
            "answer": {
                "type": "string",
                "description": "Your answer, formatted as instructed in the question prompt.",
            },
        },
        "required": ["inquiry_id", "answer"],
        "additionalProperties": False,
    },
    strict=True,
)
