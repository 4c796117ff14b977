"""`TextDelta.of`: a stream's text delta built without validation is the same model as
one built with it (equality, hash, dumps, copies, frozen)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from jpd.llm.base import TextDelta


@given(st.text())
def test_of_is_the_validated_model(text: str) -> None:
    fast, checked = TextDelta.of(text), TextDelta(text=text)
    assert type(fast) is TextDelta
    assert fast == checked
    assert hash(fast) == hash(checked)
    assert fast.text == text
    assert fast.kind == "text_delta"
    assert fast.model_dump() == checked.model_dump()
    assert fast.model_fields_set == checked.model_fields_set
    assert repr(fast) == repr(checked)


def test_of_is_frozen_and_copies_like_the_model() -> None:
    fast = TextDelta.of("a")
    with pytest.raises(ValidationError):
        fast.text = "b"  # type: ignore[misc]
    copy = fast.model_copy(update={"text": "b"})
    assert copy == TextDelta(text="b")
    assert fast == TextDelta(text="a")  # the copy shares nothing it changed
    assert fast.model_dump_json() == TextDelta(text="a").model_dump_json()
    assert TextDelta.model_validate(fast.model_dump()) == fast
