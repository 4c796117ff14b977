"""The `local` provider: an embedded GGUF model (default SmolLM2-135M) via llama-cpp-python.

The daemon never loads it: it runs in the worker process (`jpd.llm.local_worker_main`),
and the daemon's `local` provider is `jpd.llm.local_worker.LocalWorkerProvider`.

Threading: llama.cpp calls block and a model context is not thread-safe, so every
call on the model runs on the one model thread (`jpd.llm.model_thread` says why one).
`generate` computes a reply there one short step at a time (loading with prompt setup,
prompt chunks of 128 tokens, then one step per piece of text): the worker runs it as a
whole, stopping between steps when told to; `stream` awaits one step at a time, so the
event loop is free between steps and cancelling the consumer takes effect at the next
step boundary. The token generator is then closed and the semaphore that serializes
whole requests released, so the next turn finds the model idle. A semaphore rather
than a lock: when a consumer drops the stream without closing it, asyncio closes the
generator from another task, and an owner-checking lock could not be released there.

Tools: only a forced `tool_choice` (a named tool, or `any`) produces a tool call; the
output is then constrained by a grammar built from the arguments' JSON schema. With
`auto` a 135M model cannot reliably decide to call a tool, so it answers in text.
A structured answer (`response_schema`) is text decoded under its schema's grammar.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import functools
import importlib
import io
import json
import logging
from collections.abc import AsyncGenerator, Generator, Iterator
from contextlib import aclosing
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio

from jpd.llm.base import (
    EventStream,
    Finish,
    FinishReason,
    ModelRequest,
    StreamEvent,
    TextDelta,
    UsageEvent,
)
from jpd.llm.errors import ContextOverflow, ProviderError, ProviderUnavailable
from jpd.llm.local_format import ChatMessage, ToolPlan, chat_messages, token_bound, tool_plan
from jpd.llm.model_files import DEFAULT_MODEL_NAME, INSTALL_HINT, resolve_model_path
from jpd.llm.model_thread import run_on_model_thread
from jpd.protocol.usage import TokenUsage

DEFAULT_MAX_TOKENS = 512
DEFAULT_TEMPERATURE = 0.2
"""Low by default: tiny models drift into nonsense quickly at higher temperatures."""
_REPEAT_PENALTY = 1.1  # tiny models loop on phrases without it
_PREFILL_CHUNK = 128  # prompt tokens per blocking step (see `_Generation.prefill`)

_CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""Fallback template for GGUF files without `tokenizer.chat_template`."""

log = logging.getLogger(__name__)
_native_log = logging.getLogger("jpd.llm.local.llama_cpp")


def _import_llama() -> ModuleType:
    try:
        # Imported by name, so typing does not depend on whether the extra is installed.
        llama_cpp = importlib.import_module("llama_cpp")
    except ImportError as exc:
        raise ProviderUnavailable(
            f"the local model needs llama-cpp-python: {INSTALL_HINT}"
        ) from exc
    except OSError as exc:  # installed, but its shared library does not load
        raise ProviderUnavailable(f"llama-cpp-python is broken ({exc}): {INSTALL_HINT}") from exc
    _route_native_logs(llama_cpp)
    return llama_cpp


@functools.cache
def _route_native_logs(llama_cpp: ModuleType) -> object:
    """Send llama.cpp's own log lines to `logging` (DEBUG) instead of stderr.

    Cached so the ctypes callback object stays alive as long as llama.cpp may call it.
    """

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
    def callback(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        _native_log.debug("%s", text.decode("utf-8", "replace").rstrip("\n"))

    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
    return callback


class _LoadedModel:
    """A loaded `llama_cpp.Llama` with its chat template; used from one thread at a time."""

    def __init__(self, llama_cpp: ModuleType, path: Path, llama: Any) -> None:
        self.path = path
        self.names: set[str] = set()
        """The model names it was resolved from (`smollm2`, a path)."""
        self.llama = llama
        self._llama_cpp = llama_cpp
        template = llama.metadata.get("tokenizer.chat_template") or _CHATML
        special = functools.partial(llama.detokenize, special=True)
        self._formatter = llama_cpp.llama_chat_format.Jinja2ChatFormatter(
            template=template,
            eos_token=special([llama.token_eos()]).decode("utf-8", "replace"),
            bos_token=special([llama.token_bos()]).decode("utf-8", "replace"),
        )

    def tokenize_chat(self, messages: list[ChatMessage]) -> list[int]:
        """Render messages with the model's chat template and tokenize the prompt."""
        try:
            prompt: str = self._formatter(messages=messages).prompt
        except Exception as exc:  # jinja errors, including the template's raise_exception
            raise ProviderError(f"local model chat template failed: {exc}") from exc
        # The template writes any BOS itself, so the tokenizer must not add one.
        tokens: list[int] = self.llama.tokenize(prompt.encode(), add_bos=False, special=True)
        return tokens

    def is_end_of_generation(self, token: int) -> bool:
        """Whether `token` ends the turn (EOS, `<|im_end|>` and the like)."""
        return bool(self._llama_cpp.llama_vocab_is_eog(self.llama._model.vocab, token))

    def grammar(self, schema: dict[str, Any]) -> Any:
        """A llama.cpp grammar accepting exactly the JSON documents `schema` describes."""
        try:
            return self._llama_cpp.LlamaGrammar.from_json_schema(
                json.dumps(_closed(schema)), verbose=False
            )
        except Exception as exc:  # the converter rejects schema features it lacks
            raise ProviderError(f"local model cannot follow this JSON schema: {exc}") from exc


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    """Forbid properties beyond those declared, so the grammar stops after them."""
    if schema.get("type") == "object" and "additionalProperties" not in schema:
        schema = {**schema, "additionalProperties": False}
    for key in ("oneOf", "anyOf"):
        if key in schema:
            schema = {**schema, key: [_closed(s) for s in schema[key]]}
    if isinstance(schema.get("properties"), dict):
        props = schema["properties"]
        schema = {**schema, "properties": {k: _closed(v) for k, v in props.items()}}
    return schema


class _Generation:
    """One model call. Every method blocks and runs in a worker thread."""

    def __init__(
        self, model: _LoadedModel, request: ModelRequest, plan: ToolPlan | None, seed: int
    ) -> None:
        self._model = model
        self.prompt_tokens = model.tokenize_chat(chat_messages(request, plan))
        room = model.llama.n_ctx() - len(self.prompt_tokens)
        if room < 1:
            raise ContextOverflow(
                f"the conversation ({len(self.prompt_tokens)} tokens) does not fit the local "
                f"model's context of {model.llama.n_ctx()} tokens: raise providers.local.n_ctx "
                "or start a new conversation"
            )
        self._limit = min(request.max_tokens or DEFAULT_MAX_TOKENS, room)
        temperature = request.temperature
        if temperature is None:
            constrained = plan is not None or request.response_schema is not None
            temperature = 0.0 if constrained else DEFAULT_TEMPERATURE
        model.llama.set_seed(seed)
        # A forced tool's arguments, or a structured answer (`response_schema`), are
        # decoded under a grammar of their schema: the output is valid JSON for it.
        schema = plan.schema if plan else request.response_schema
        self._tokens: Iterator[int] = model.llama.generate(
            self.prompt_tokens,
            temp=temperature,
            repeat_penalty=_REPEAT_PENALTY,
            grammar=model.grammar(schema) if schema is not None else None,
        )
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._prefill_ends = self._plan_prefill()
        self.output_tokens = 0
        self.finish: FinishReason | None = None

    def _plan_prefill(self) -> list[int]:
        # Where the prompt diverges from what the context already holds (earlier turns).
        llama = self._model.llama
        cached = 0
        for old, new in zip(llama.input_ids[: llama.n_tokens], self.prompt_tokens, strict=False):
            if old != new:
                break
            cached += 1
        return list(range(cached + _PREFILL_CHUNK, len(self.prompt_tokens) - 1, _PREFILL_CHUNK))

    @property
    def prefilling(self) -> bool:
        """Whether chunks of the prompt are left for `prefill`."""
        return bool(self._prefill_ends)

    def prefill(self) -> None:
        """Evaluate the next chunk of an uncached prompt.

        A long prompt takes seconds to evaluate in one call, which cancellation would
        have to wait for; chunks keep each step short. `generate` reuses every evaluated
        chunk as a cached prefix (the token it samples is discarded).
        """
        end = self._prefill_ends.pop(0)
        chunk = self._model.llama.generate(self.prompt_tokens[:end], temp=0.0)
        next(chunk, None)
        chunk.close()

    def next_text(self) -> str | None:
        """Generate until the next non-empty piece of text; None once finished."""
        while self.finish is None:
            if self.output_tokens >= self._limit:
                self.finish = "max_tokens"
                break
            token = next(self._tokens, None)
            if token is None or self._model.is_end_of_generation(token):
                self.finish = "end_turn"
                break
            self.output_tokens += 1
            # Pieces may split a UTF-8 sequence; the incremental decoder holds it back.
            text = self._decoder.decode(self._model.llama.detokenize([token]))
            if text:
                return text
        return self._decoder.decode(b"", final=True) or None

    def close(self) -> None:
        """Stop the token generator (safe to call at any point, also twice)."""
        close = getattr(self._tokens, "close", None)
        if close is not None:
            close()


def _next_step(steps: Iterator[StreamEvent | None]) -> tuple[bool, StreamEvent | None]:
    """(False, None) once `steps` is over, else (True, its next step)."""
    for step in steps:
        return True, step
    return False, None


class LocalProvider:
    """The embedded model provider (`local/smollm2`, or `local/<path to .gguf>`).

    The model loads lazily on first use (or via `load`) and stays loaded until
    `aclose`; requests naming another file reload. Consumers must drain or close the
    stream (an `async for` to the end does), since a pending stream holds the model.
    """

    name = "local"
    refuses_forced_tool_with_reasoning = False
    constrains_decoding = True

    def __init__(
        self,
        model_path: Path | None = None,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        seed: int = 0,
    ) -> None:
        self._model_path = model_path
        self._n_ctx = n_ctx
        self._n_threads = n_threads
        self._seed = seed
        self._model: _LoadedModel | None = None
        self._serial = anyio.Semaphore(1)

    async def load(self, model: str = DEFAULT_MODEL_NAME) -> None:
        """Load `model` now instead of on the first request (raises like `stream`)."""
        async with self._serial:
            await run_on_model_thread(self._load_sync, model)

    def stream(self, request: ModelRequest) -> EventStream:
        """Generate a reply: text deltas (or one forced tool call), usage, then finish."""
        return aclosing(self._events(request))

    async def _events(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        async with self._serial:
            steps = self.generate(request)
            try:
                while True:
                    more, step = await run_on_model_thread(_next_step, steps)
                    if not more:
                        break
                    if step is not None:
                        yield step
            finally:
                steps.close()  # never running here: each step was awaited to its end

    def generate(self, request: ModelRequest) -> Generator[StreamEvent | None, None, None]:
        """`stream`'s events, computed on the calling thread (the model thread), one step
        per item; None ends a step that has nothing to show (a prompt chunk, a token of
        a tool call's arguments): a place to stop at, by closing the iterator."""
        plan = tool_plan(request)
        run = self._start(request, plan)
        arguments: list[str] = []  # a forced tool call's JSON, not shown as text
        try:
            while run.prefilling:
                run.prefill()
                yield None
            while (text := run.next_text()) is not None:
                if plan is None:
                    yield TextDelta(text=text)
                else:
                    arguments.append(text)
                    yield None
        finally:
            run.close()
        yield UsageEvent(
            usage=TokenUsage(input_tokens=len(run.prompt_tokens), output_tokens=run.output_tokens)
        )
        if plan is None:
            yield Finish(reason=run.finish or "end_turn")
            return
        if run.finish == "max_tokens":
            raise ProviderError(
                f"local model did not finish the tool arguments within {run.output_tokens} "
                "tokens: raise assistant.model.parameters.max_tokens"
            )
        yield plan.read_call("".join(arguments))
        yield Finish(reason="tool_use")

    @property
    def context_window(self) -> int:
        """The context size it loads models with (`providers.local.n_ctx`)."""
        return self._n_ctx

    def token_bound(self, request: ModelRequest) -> int:
        """An upper bound of `count_tokens(request)` from the text alone (no worker trip)."""
        return token_bound(request)

    async def count_tokens(self, request: ModelRequest) -> int:
        """The exact size of `request`'s prompt in the model's tokens (chat template
        applied), without generating (`jpd.context` counts with it)."""
        async with self._serial:
            return await run_on_model_thread(self.count, request)

    def count(self, request: ModelRequest) -> int:
        """`count_tokens`, on the calling thread (the model thread)."""
        model = self._load_sync(request.model)
        return len(model.tokenize_chat(chat_messages(request, tool_plan(request))))

    async def aclose(self) -> None:
        """Free the loaded model (waits for a running request to finish)."""
        async with self._serial:
            model, self._model = self._model, None
            if model is not None:
                await run_on_model_thread(model.llama.close)

    def _start(self, request: ModelRequest, plan: ToolPlan | None) -> _Generation:
        return _Generation(self._load_sync(request.model), request, plan, self._seed)

    def _load_sync(self, name: str) -> _LoadedModel:
        if self._model is not None and name in self._model.names:
            return self._model  # no file lookups before every request's first token
        path = resolve_model_path(name, self._model_path)
        if self._model is not None and self._model.path == path:
            self._model.names.add(name)
            return self._model
        llama_cpp = _import_llama()
        if self._model is not None:
            self._model.llama.close()
            self._model = None
        self._model = _LoadedModel(llama_cpp, path, self._new_llama(llama_cpp, path))
        self._model.names.add(name)
        return self._model

    def _new_llama(self, llama_cpp: ModuleType, path: Path) -> Any:
        # verbose=True on purpose: with verbose=False llama-cpp-python silences loading
        # by pointing fds 1 and 2 at /dev/null process-wide, which would swallow JSON-RPC
        # output the event loop writes to stdout meanwhile. Native logs already go to
        # `logging`; the constructor's own prints to sys.stderr are captured here.
        printed = io.StringIO()
        try:
            with contextlib.redirect_stderr(printed):
                llama = llama_cpp.Llama(
                    model_path=str(path),
                    n_ctx=self._n_ctx,
                    n_threads=self._n_threads,
                    seed=self._seed,
                    verbose=True,
                )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ProviderUnavailable(f"could not load local model {path}: {exc}") from exc
        finally:
            _native_log.debug("%s", printed.getvalue())
        llama.verbose = False  # no per-call prints from here on
        log.info("loaded local model %s", path)
        return llama
