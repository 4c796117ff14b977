"""A model of Anthropic's prompt cache, for `bench_inquiry`'s token figures: which input
bytes of a request are read from the cache once earlier requests filled it.

Entries are written at `cache_control` breakpoints, keyed by everything before them in
cache order (tools, system, `tool_choice`, then each message block); a request reads the
longest entry found within `LOOKBACK` block boundaries before each of its breakpoints.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def encode(value: Any) -> bytes:
    """JSON as the request builders serialise it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False).encode()


LOOKBACK = 20
"""Block boundaries Anthropic checks for an earlier cache entry before each breakpoint."""


def strip_markers(value: Any) -> Any:
    """`value` without `cache_control` keys (breakpoints are not cached content)."""
    if isinstance(value, dict):
        return {k: strip_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_markers(v) for v in value]
    return value


def cache_sequence(body: dict[str, Any], *, markers: bool) -> bytes:
    """The body's cacheable content in cache order: tools, system, then each message."""
    if not markers:
        body = strip_markers(body)
    parts = [encode(body["tools"]), encode(body["system"])]
    parts += [encode(turn) for turn in body["messages"]]
    return b"".join(parts)


def shared(a: bytes, b: bytes) -> int:
    """Length of the common prefix of `a` and `b`."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def cache_blocks(body: dict[str, Any], *, turn_before: bool) -> list[tuple[bytes, bool]]:
    """(content, has a breakpoint) per block, in cache order.

    With `turn_before`, the message breakpoints sit on the last turn and the turn right
    before it (whatever its role) instead of where the builder put them.
    """
    out = [(encode(strip_markers(t)), "cache_control" in t) for t in body["tools"]]
    out += [(encode(strip_markers(b)), "cache_control" in b) for b in body.get("system", [])]
    # Anthropic keys cached messages on `tool_choice` too: a change misses them all.
    out.append((encode(body.get("tool_choice")), False))
    turns = body["messages"]
    for index, turn in enumerate(turns):
        for position, block in enumerate(turn["content"]):
            flag = "cache_control" in block
            if turn_before:
                flag = position == len(turn["content"]) - 1 and index >= len(turns) - 2
            out.append((encode({"role": turn["role"], **strip_markers(block)}), flag))
    return out


class PromptCache:
    """Prefix entries written at breakpoints; a request reads the longest one it finds."""

    def __init__(self) -> None:
        self.entries: set[bytes] = set()

    def send(self, blocks: list[tuple[bytes, bool]]) -> int:
        """Send one request; returns its input bytes not read from the cache."""
        keys: list[bytes] = []
        digest = hashlib.sha256()
        for content, _ in blocks:
            digest.update(len(content).to_bytes(8, "big") + content)
            keys.append(digest.copy().digest())
        marks = [i for i, (_, flag) in enumerate(blocks) if flag]
        hit = 0
        for mark in marks:
            for j in range(mark, max(-1, mark - LOOKBACK), -1):
                if keys[j] in self.entries:
                    hit = max(hit, j + 1)
                    break
        self.entries.update(keys[m] for m in marks)
        return sum(len(content) for content, _ in blocks[hit:])


def uncached(
    before: list[dict[str, Any]], requests: list[dict[str, Any]], *, turn_before: bool
) -> int:
    """Input bytes of `requests` not read from cache, once `before` filled it."""
    cache = PromptCache()
    for body in before:
        cache.send(cache_blocks(body, turn_before=turn_before))
    return sum(cache.send(cache_blocks(b, turn_before=turn_before)) for b in requests)


def uncached_share(before: list[dict[str, Any]], body: dict[str, Any]) -> tuple[int, int]:
    """(input bytes of `body` not read from cache once `before` filled it, all its input
    bytes), with the builder's breakpoints."""
    cache = PromptCache()
    for earlier in before:
        cache.send(cache_blocks(earlier, turn_before=False))
    blocks = cache_blocks(body, turn_before=False)
    return cache.send(blocks), sum(len(content) for content, _ in blocks)
