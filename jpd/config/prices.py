"""`[prices."<provider>/<model>"]`: what a model's tokens cost, for the cost shown after
each turn and per conversation (protocol.md section 13, `prices`)."""

from typing import Annotated

from pydantic import Field

from jpd.config.models import ConfigModel


class Price(ConfigModel):
    """Price per million tokens, in whatever currency the user writes them in."""

    input: Annotated[float, Field(ge=0)]
    output: Annotated[float, Field(ge=0)]


def cost(price: Price, input_tokens: int | None, output_tokens: int | None) -> float:
    """The cost of one model response's tokens at `price` (input tokens as the provider
    counts them; cache discounts are not modelled)."""
    return ((input_tokens or 0) * price.input + (output_tokens or 0) * price.output) / 1e6
