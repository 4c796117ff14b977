"""A turn's structured answer (`turn/start` `responseSchema`, `jp query --schema`): the
schema is checked when the turn starts, asked for in the system prompt and, where the
provider has a way, enforced by it (jpd/llm/structured.py); the final answer is checked
against it before the turn ends well: an answer that is not valid JSON for the schema
ends the turn with an error, so a client never prints one as the result."""

from __future__ import annotations

import json
from typing import Any

from jpd.llm.errors import ProviderError
from jpd.llm.structured import instruction
from jpd.protocol.errors import InvalidParams

MAX_SCHEMA_BYTES = 64 * 1024


def check_schema(schema: dict[str, Any]) -> None:
    """Raise `InvalidParams` for a schema that is not a usable JSON schema."""
    import jsonschema

    if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
        raise InvalidParams(f"responseSchema is larger than {MAX_SCHEMA_BYTES} bytes")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise InvalidParams(f"responseSchema is not a valid JSON schema: {exc.message}") from None


def with_schema(system: str | None, schema: dict[str, Any] | None) -> str | None:
    """The system prompt with the request for the JSON answer, when there is a schema."""
    if schema is None:
        return system
    return f"{system}\n\n{instruction(schema)}" if system else instruction(schema)


def check_answer(answer: str, schema: dict[str, Any]) -> Any:
    """The answer's JSON value; `ProviderError` (the turn fails) when it is not JSON or
    not valid against `schema`."""
    import jsonschema

    text = answer.strip()
    if text.startswith("```"):  # a fenced answer despite the instruction: the fence goes
        text = text.strip("`").removeprefix("json").strip()
    try:
        value = json.loads(text)
    except ValueError:
        raise ProviderError("the model's answer is not JSON (responseSchema)") from None
    try:
        jsonschema.validators.validator_for(schema)(schema).validate(value)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the answer"
        raise ProviderError(
            f"the model's answer is not valid against the schema: {where}: {exc.message}"
        ) from None
    return value
