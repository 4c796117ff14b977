"""Who writes a conversation's summaries (`jpd.context.setup` picks it per turn).

Apart from the writing (`jpd.context.summary`): every turn makes one, while the writing
and the planning of a cut load only with the first compaction."""

from __future__ import annotations

from dataclasses import dataclass

from jpd.llm import base as llm


@dataclass
class Summarizer:
    """The provider and model that write summaries, and the request's fixed parts."""

    provider: llm.Provider
    model: str
    """The model name within the provider."""
    model_id: str
    """`<provider>/<model>`, recorded in the event."""
    max_tokens: int
    small: bool = False
