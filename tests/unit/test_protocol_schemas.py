"""The committed protocol schemas and protocol.md must keep up with the wire models."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest

from jpd import schemas
from jpd.conversation import events as ev
from jpd.protocol.method_table import TABLE, ClientRequest, ServerRequest
from jpd.protocol.question import BooleanAnswer, Question
from jpd.protocol.turn_events import TurnEvent
from jpd.protocol.usage import TokenUsage

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL_MD = ROOT / "protocol.md"
REGENERATE = "run `python -m jpd.schemas --write` and update protocol.md to match"


def _union_tags(union: Any, field: str) -> list[str]:
    """The literal tag values (`kind`, `type`) of an annotated discriminated union."""
    members = typing.get_args(typing.get_args(union)[0])
    return [member.model_fields[field].default for member in members]


TURN_EVENT_KINDS = _union_tags(TurnEvent, "kind")
PERSISTED_TYPES = _union_tags(ev.Event, "type")


def test_committed_schema_file_is_current() -> None:
    path = schemas.SCHEMA_PATH
    assert path.is_file(), f"{path} is missing: {REGENERATE}"
    committed = path.read_text(encoding="utf-8")
    assert json.loads(committed) == schemas.export_schemas(), f"{path} is stale: {REGENERATE}"
    assert committed == schemas.render(), f"{path} is not in canonical form: {REGENERATE}"


@pytest.mark.parametrize(
    ("kind", "names"),
    [
        ("method", sorted(TABLE)),
        ("turn/event kind", TURN_EVENT_KINDS),
        ("persisted event type", PERSISTED_TYPES),
    ],
)
def test_protocol_md_names_everything(kind: str, names: list[str]) -> None:
    text = PROTOCOL_MD.read_text(encoding="utf-8")
    missing = [name for name in names if f"`{name}`" not in text]
    assert not missing, f"protocol.md does not document {kind}s {missing}: {REGENERATE}"


def test_protocol_md_names_cancel_request_and_turn_event() -> None:
    text = PROTOCOL_MD.read_text(encoding="utf-8")
    assert "`$/cancelRequest`" in text
    assert "`turn/event`" in text


def test_export_covers_every_method() -> None:
    exported = schemas.export_schemas()
    for name, method in TABLE.items():
        assert f"{name}.params" in exported
        has_result = isinstance(method, ClientRequest | ServerRequest)
        assert (f"{name}.result" in exported) is has_result
    for name in ("turn/event.params", "persisted-event", "error", "$/cancelRequest.params"):
        assert name in exported
    assert all(s["$schema"] == schemas.JSON_SCHEMA_DIALECT for s in exported.values())


def test_export_is_deterministic_with_sorted_keys() -> None:
    first, second = schemas.render(), schemas.render()
    assert first == second
    assert first.endswith("}\n")

    def keys_sorted(value: Any) -> bool:
        if isinstance(value, dict):
            return list(value) == sorted(value) and all(keys_sorted(v) for v in value.values())
        if isinstance(value, list):
            return all(keys_sorted(v) for v in value)
        return True

    assert keys_sorted(schemas.export_schemas())


def test_shutdown_result_is_null() -> None:
    result = schemas.export_schemas()["shutdown.result"]
    assert result["type"] == "null"


def test_params_reject_unknown_fields_and_use_camel_case() -> None:
    start = schemas.export_schemas()["turn/start.params"]
    assert start["additionalProperties"] is False
    assert "conversationId" in start["properties"]
    assert start["required"] == ["message"]


def test_serialization_schemas_match_what_to_wire_sends() -> None:
    defs = schemas.export_schemas()["turn/event.params"]["$defs"]
    completed = defs["TurnCompleted"]
    # `kind` has a default but is always sent; `error` is absent when unset, never null.
    assert set(completed["required"]) == {"kind", "stopReason"}
    assert completed["properties"]["error"] == {"title": "Error", "type": "string"}
    listing = schemas.export_schemas()["turn/list.result"]
    assert set(listing["required"]) == {"turns", "inquiries"}


def test_only_shutdown_returns_null() -> None:
    null_results = {
        name for name, m in TABLE.items() if isinstance(m, ClientRequest) and m.result is None
    }
    assert null_results == {"shutdown"}
    assert schemas.export_schemas()["shutdown.result"]["type"] == "null"


def _persisted_def(schema: dict[str, Any], event_type: str) -> dict[str, Any]:
    ref = schema["discriminator"]["mapping"][event_type]
    definition: dict[str, Any] = schema["$defs"][ref.rsplit("/", 1)[-1]]
    return definition


def _fits(record: dict[str, Any], definition: dict[str, Any]) -> bool:
    """A shallow check: required keys present, every key declared, constants equal."""
    if "anyOf" in definition:
        return any(_fits(record, variant) for variant in definition["anyOf"])
    props = definition["properties"]
    if not set(definition.get("required", [])) <= set(record) or not set(record) <= set(props):
        return False
    return all(record[k] == props[k]["const"] for k in record if "const" in props[k])


INQUIRY_QUESTION = Question(id="q", text="Proceed?", answer_type=BooleanAnswer())
EVENTS: list[ev.Event] = [
    ev.TurnStart(turn_id="t-1", model="test/scripted"),
    ev.ChatRequest(content="hi"),
    ev.ChatResponse(message="hello", usage=TokenUsage(input_tokens=1)),
    ev.ChatResponse(reasoning="thinking"),
    ev.ToolCallRequest(id="c1", name="t", arguments={"a": 1}),
    ev.ToolCallResponse(id="c1", content="ok", is_error=False),
    ev.InquiryRequest(id="c1.q.1", source=ev.ToolSource(name="t"), question=INQUIRY_QUESTION),
    ev.InquiryResponse(response=ev.Answered(id="c1.q.1", answer=True)),
    ev.InquiryResponse(response=ev.Cancelled(id="c1.q.1", reason="some_future_reason")),
    ev.InquiryResponse(response=ev.Redacted(id="c1.q.1")),
    ev.TurnEnd(turn_id="t-1", stop_reason="error", error="boom"),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.type)
def test_persisted_schema_describes_the_on_disk_lines(event: ev.Event) -> None:
    schema = schemas.export_schemas()["persisted-event"]
    record = json.loads(ev.dump_event(event))
    assert _fits(record, _persisted_def(schema, record["type"])), record


def test_persisted_schema_accepts_legacy_and_rejects_outcomeless_cancellation() -> None:
    schema = schemas.export_schemas()["persisted-event"]
    definition = _persisted_def(schema, "inquiry_response")
    base = {"type": "inquiry_response", "timestamp": "2026-01-01T00:00:00Z", "id": "c1.q.1"}
    assert _fits({**base, "answer": "yes"}, definition)
    assert not _fits({**base, "reason": "user"}, definition)
    assert all("response" not in v["properties"] for v in definition["anyOf"])


def test_check_reports_a_stale_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "protocol.schema.json"
    assert schemas.main(["--check", "--path", str(target)]) == 1
    assert "is missing" in capsys.readouterr().err

    assert schemas.main(["--write", "--path", str(target)]) == 0
    assert schemas.main(["--check", "--path", str(target)]) == 0

    target.write_text(target.read_text(encoding="utf-8").replace("turnId", "turn_id"))
    assert schemas.main(["--check", "--path", str(target)]) == 1
    err = capsys.readouterr().err
    assert "python -m jpd.schemas --write" in err
    assert "protocol.md" in err


def test_main_requires_an_action() -> None:
    with pytest.raises(SystemExit) as exc:
        schemas.main([])
    assert exc.value.code == 2


def test_a_delta_notification_is_built_as_pydantic_would_dump_it() -> None:
    from pydantic import BaseModel

    from jpd.protocol.turn_events import (
        ContextCompactedEvent,
        ContextUsage,
        FileDiff,
        ForcedToolRetried,
        ReasoningDeltaEvent,
        RetryScheduled,
        TextDeltaEvent,
        ToolCallStarted,
        ToolLocation,
        ToolProgress,
        ToolResult,
        TurnCompleted,
        TurnEventParams,
        TurnStarted,
        UsageReported,
    )
    from jpd.protocol.usage import TokenUsage

    # Every kind: the envelope is built directly, each event dumped by its own model.
    events = [
        TextDeltaEvent(text='a "quoted" é\n\x00\u2028 😀 \\'),
        ReasoningDeltaEvent(text=""),
        TurnCompleted(stop_reason="end_turn"),
        TurnCompleted(stop_reason="error", error="boom"),
        TurnStarted(model="test/x"),
        ToolCallStarted(
            id="c1",
            name="fs_modify_file",
            arguments={"path": "a.py", "n": [1, None]},
            title="edit a.py",
            locations=[ToolLocation(path="a.py", line=3)],
            diff=FileDiff(path="a.py", new_text="x"),
        ),
        ToolResult(id="c1", content="done", is_error=False),
        ToolProgress(id="c1", progress=0.5),
        UsageReported(
            usage=TokenUsage(input_tokens=3, cache_read_tokens=1),
            cost=0.25,
            context=ContextUsage(used=10, window=100),
        ),
        ContextCompactedEvent(trigger="auto", method="summary", tokens_before=9, tokens_after=2),
        RetryScheduled(attempt=1, delay=0.5, reason="overloaded"),
        ForcedToolRetried(message="again"),
    ]
    for event in events:
        params = TurnEventParams(conversation_id="c-1", turn_id="t-1", seq=7, event=event)
        dumped = BaseModel.model_dump(params, mode="json", by_alias=True, exclude_none=True)
        assert params.to_wire() == dumped
        assert list(params.to_wire()) == list(dumped)
        message = {"jsonrpc": "2.0", "method": "turn/event", "params": dumped}
        direct = params.delta_message("turn/event")
        if direct is not None:
            assert direct == json.dumps(message, separators=(",", ":")).encode()
        else:
            assert not isinstance(event, TextDeltaEvent | ReasoningDeltaEvent)
