"""The embedded model: first token and decode speed through jpd (a turn on
`local/smollm2`, served by the daemon's worker process) against llama_cpp called
directly in this process, in interleaved rounds of one run.

Both sides decode the same prompts (system prompt and question, the model's chat
template) greedily with the same repeat penalty, with the model loaded and the system
prompt already evaluated (a warm-up round), so the figures are the daemon's and the
pipe's cost, not the model's load time.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from bench.report import Row, med, ms
from bench.rpcclient import Client

SYSTEM = "You are a helpful assistant."
PROMPT = "Write a long story about the sea, number {}."
"""A new question each round (the system prompt stays evaluated, as in a warm model)."""


def _config(home: Path, base: dict[str, str], max_tokens: int) -> dict[str, str]:
    """A daemon's environment: answers of up to `max_tokens`, set in its config file
    (as a user would; a per-turn override would build the turn's tools anew)."""
    config = home / f"config-{max_tokens}.toml"
    config.write_text(
        '[assistant]\nsystem_prompt = "' + SYSTEM + '"\ntool_choice = "none"\n'
        '[assistant.model]\nid = "local/smollm2"\n'
        f"[assistant.model.parameters]\nmax_tokens = {max_tokens}\ntemperature = 0.0\n"
    )
    env = {**base, "JP_CONFIG": str(config), "JP_DATA_DIR": str(home / "data")}
    env["JP_LOG_DIR"] = str(home / "logs")
    env["JP_STATE_DIR"] = str(home / "state")
    return env


class _Direct:
    """llama_cpp in this process, decoding as the worker does."""

    def __init__(self) -> None:
        import llama_cpp

        from jpd.llm.base import ModelRequest, UserMessage
        from jpd.llm.local import _REPEAT_PENALTY, _LoadedModel
        from jpd.llm.local_format import chat_messages
        from jpd.llm.model_files import find_default_model

        path = find_default_model()
        llama = llama_cpp.Llama(model_path=str(path), n_ctx=2048, seed=0, verbose=False)
        self._model = _LoadedModel(llama_cpp, path, llama)

        def prompt(number: int) -> list[int]:
            question = UserMessage(content=PROMPT.format(number))
            request = ModelRequest(model="smollm2", system=SYSTEM, messages=(question,))
            return self._model.tokenize_chat(chat_messages(request))

        self.prompt = prompt
        self._penalty = _REPEAT_PENALTY

    def run(self, number: int, max_tokens: int) -> tuple[float, float, int]:
        """(seconds to the first token, seconds to the last, tokens) for question `number`,
        from the chat messages on (a chat goes through its template, here as in jpd)."""
        llama = self._model.llama
        start = time.perf_counter()
        prompt = self.prompt(number)
        first = last = 0.0
        count = 0
        tokens = llama.generate(prompt, temp=0.0, repeat_penalty=self._penalty)
        for token in tokens:
            if self._model.is_end_of_generation(token):
                break
            llama.detokenize([token])
            last = time.perf_counter()
            first = first or last
            count += 1
            if count >= max_tokens:
                break
        tokens.close()  # as the worker does
        return first - start, last - start, count


async def _jpd_turn(client: Client, number: int) -> tuple[float, float, int]:
    """One turn in a new conversation: as `_Direct.run`, through the daemon."""
    start = time.perf_counter()
    result = await client.request("turn/start", {"message": PROMPT.format(number)})
    first = last = 0.0
    tokens = 0
    queued, client.notifications = client.notifications, []
    while True:
        if queued:
            event: dict[str, Any] = queued.pop(0).get("params", {}).get("event", {})
        else:
            body = await client.read_body()
            if not any(kind in body for kind in (b'"text_delta"', b'"usage"', b'"turn_completed"')):
                continue
            event = json.loads(body)["params"]["event"]
        kind = event.get("kind")
        if kind == "text_delta":
            last = time.perf_counter()
            first = first or last
        elif kind == "usage":
            tokens = int(event["usage"].get("outputTokens") or 0)
        elif kind == "turn_completed":
            break
    del result
    return first - start, last - start, tokens


async def _rounds(
    env: dict[str, str], direct: _Direct, numbers: range, max_tokens: int
) -> tuple[list[tuple[float, float, int]], list[tuple[float, float, int]]]:
    """Interleaved rounds, jpd's and direct's, of questions `numbers`, after a warm-up
    (the worker started, the model loaded, the system prompt evaluated)."""
    ours: list[tuple[float, float, int]] = []
    theirs: list[tuple[float, float, int]] = []
    client, process = await Client.spawn(env)
    try:
        await client.initialize()
        await _jpd_turn(client, 0)
        direct.run(0, max_tokens)
        for number in numbers:
            await asyncio.sleep(0.3)  # native threads of the previous run go idle
            theirs.append(direct.run(number, max_tokens))
            await asyncio.sleep(0.3)
            ours.append(await _jpd_turn(client, number))
    finally:
        await client.close()
        process.terminate()
        await process.wait()
    return ours, theirs


async def _measure(home: Path, base: dict[str, str], quick: bool) -> list[Row]:
    direct = _Direct()
    # The first token is short work on a noisy clock: many short rounds. Decode speed
    # needs long answers: a few long rounds.
    short = await _rounds(_config(home, base, 4), direct, range(1, 5 if quick else 26), 4)
    long = await _rounds(_config(home, base, 128), direct, range(1, 3 if quick else 8), 128)
    first = med([r[0] for r in short[0]]), med([r[0] for r in short[1]])
    total = med([r[1] for r in long[0]]), med([r[1] for r in long[1]])
    tokens = long[0][-1][2], long[1][-1][2]
    rate = tokens[0] / total[0], tokens[1] / total[1]
    return [
        Row("embedded model through jpd, first token", ms(first[0]),
            f"llama_cpp directly {ms(first[1])}", first[0] / first[1], "≤ 1.1x"),
        Row("embedded model through jpd, tokens/s",
            f"{rate[0]:.1f} ({tokens[0]} in {ms(total[0])})",
            f"llama_cpp directly {rate[1]:.1f} ({tokens[1]} in {ms(total[1])})",
            rate[1] / rate[0], "≤ 1.1x"),
    ]  # fmt: skip


def embedded(home: Path, base: dict[str, str], quick: bool) -> list[Row]:
    """First token and decode speed of SmolLM2, through jpd against direct."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return [Row("embedded model through jpd", "-", "llama-cpp-python not installed", None, "-")]
    return asyncio.run(_measure(home, base, quick))
