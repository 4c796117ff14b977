"""Token usage of one model response: one model for the provider stream, the persisted
`chat_response` (field names, snake_case) and the `usage` turn event (camelCase on the
wire, through `WireModel.to_wire()`)."""

from pydantic import AliasGenerator, BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class TokenUsage(BaseModel):
    """Token counts as the provider reports them; None where it does not."""

    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        alias_generator=AliasGenerator(serialization_alias=to_camel),
        defer_build=True,
    )

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None
