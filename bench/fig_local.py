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
    config = home / "config.toml"
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

    def __init__(self, max_tokens: int) -> None:
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
        self._max_tokens = max_tokens

    def run(self, number: int) -> tuple[float, float, int]:
        """(seconds to the first token, seconds to the last, tokens) for question `number`."""
        llama = self._model.llama
        prompt = self.prompt(number)
        start = time.perf_counter()
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
            if count >= self._max_tokens:
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


async def _measure(env: dict[str, str], rounds: int, max_tokens: int) -> list[Row]:
    direct = _Direct(max_tokens)
    client, process = await Client.spawn(env)
    try:
        await client.initialize()
        await _jpd_turn(client, 0)  # starts the worker, loads the model
        direct.run(0)
        ours: list[tuple[float, float, int]] = []
        theirs: list[tuple[float, float, int]] = []
        for number in range(1, rounds + 1):
            await asyncio.sleep(0.3)  # native threads of the previous run go idle
            theirs.append(direct.run(number))
            await asyncio.sleep(0.3)
            ours.append(await _jpd_turn(client, number))
    finally:
        await client.close()
        process.terminate()
        await process.wait()
    first = med([r[0] for r in ours]), med([r[0] for r in theirs])
    total = med([r[1] for r in ours]), med([r[1] for r in theirs])
    tokens = ours[-1][2], theirs[-1][2]
    rate = tokens[0] / total[0], tokens[1] / total[1]
    return [
        Row("embedded model through jpd, first token", ms(first[0]),
            f"llama_cpp directly {ms(first[1])}", first[0] / first[1], "≤ 1.1x"),
        Row("embedded model through jpd, tokens/s",
            f"{rate[0]:.1f} ({tokens[0]} in {ms(total[0])})",
            f"llama_cpp directly {rate[1]:.1f} ({tokens[1]} in {ms(total[1])})",
            rate[1] / rate[0], "≤ 1.1x"),
    ]  # fmt: skip


def embedded(home: Path, base: dict[str, str], rounds: int, max_tokens: int) -> list[Row]:
    """First token and decode time per token of SmolLM2, through jpd against direct."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return [Row("embedded model through jpd", "-", "llama-cpp-python not installed", None, "-")]
    return asyncio.run(_measure(_config(home, base, max_tokens), rounds, max_tokens))
