"""Errors raised by providers, mapped to JSON-RPC errors or turn stop reasons by callers."""

from __future__ import annotations


class ProviderError(Exception):
    """A model call failed. `message` is one line a person can act on."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable


class ProviderUnavailable(ProviderError):
    """The provider cannot be used at all (missing extra, missing key, unknown name)."""


class ContextOverflow(ProviderError):
    """The request does not fit the model's context window (Anthropic "prompt is too
    long", OpenAI `context_length_exceeded`, the embedded model's context): the turn
    compacts once and retries once (`jpd.context`)."""
