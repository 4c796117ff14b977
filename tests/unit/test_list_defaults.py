"""Empty-list defaults of the models `initialize` and a plain turn build are `[]` (or,
for models validated by the thousand, a factory of their own), not
`default_factory=list`: pydantic reads a default factory's signature, and for `list`
(a builtin with a text signature) the first read compiles `tokenize`'s patterns, about
1.5 ms on the start-up path (protocol.md section 4, "Start-up"). `[]` is copied for each
instance, so no instance shares its list with another."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from jpd.config.config import Config, ProtectedPathsConfig
from jpd.llm.scripted import Script, ScriptedResponse
from jpd.protocol.environment import ClientEnvironment
from jpd.protocol.initialize import ClientCapabilitiesParams, InitializeParams, PromptCapability
from jpd.protocol.turn_events import ToolCallStarted
from jpd.protocol.turn_requests import TurnStartParams

BUILT_BY_A_QUERY = (
    InitializeParams,
    ClientCapabilitiesParams,
    PromptCapability,
    ClientEnvironment,
    TurnStartParams,
    ToolCallStarted,
    Config,
    ProtectedPathsConfig,
    ScriptedResponse,
)


@pytest.mark.parametrize("model", BUILT_BY_A_QUERY, ids=lambda m: m.__name__)
def test_no_default_factory_with_a_builtin_signature(model: type[BaseModel]) -> None:
    for name, field in model.model_fields.items():
        factory = field.default_factory
        assert getattr(factory, "__text_signature__", None) is None, f"{name}: {factory!r}"


def test_empty_list_defaults_are_fresh_per_instance() -> None:
    first = TurnStartParams.model_validate({"message": "a"})
    second = TurnStartParams.model_validate({"message": "b"})
    assert first.images == [] and first.tools == [] and first.attachments == []
    assert first.images is not second.images
    assert first.labels is not second.labels
    assert ClientEnvironment.model_validate({}).additional_roots == []
    assert PromptCapability.model_validate({}).answer_types == []
    script = Script.model_validate({"responses": [{"text": "a"}, {"text": "b"}]})
    assert script.responses[0].tool_calls == []
    assert script.responses[0].tool_calls is not script.responses[1].tool_calls
    one, other = Config(), Config()
    assert one.config_load_paths == [] and one.config_load_paths is not other.config_load_paths


def test_bad_items_in_a_list_with_an_empty_default_are_still_refused() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        TurnStartParams.model_validate({"message": "a", "configFiles": [3]})
    with pytest.raises(ValidationError):
        ProtectedPathsConfig.model_validate({"allow": "not a list"})
