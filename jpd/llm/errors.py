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
    compacts once and retries once (`jpd.context`).

    `window` is the window the provider stated in its refusal and `requested` the size
    it refused (each None when unstated), read from the message unless given."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        window: int | None = None,
        requested: int | None = None,
    ) -> None:
        super().__init__(message, retryable=retryable)
        from jpd.llm.overflow import refused_size, stated_window

        self.window = window if window is not None else stated_window(message)
        self.requested = requested if requested is not None else refused_size(message)
