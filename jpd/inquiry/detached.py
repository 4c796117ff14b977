"""Applying the detached policy (protocol.md section 10.2): one decision for questions
(the router) and permission requests (the permission gate).

`decide` is the table of the non-waiting modes; `apply_detached` adds `defer`: wait for
a client up to the policy's timeout, then apply its fallback. Each caller maps the
verdict to its own action: for a question `Automatic` means the assistant answers, for
a permission request that it is allowed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from jpd.config.tools import DetachedPolicy
from jpd.inquiry.pending import Reply
from jpd.protocol.detached import DetachedFallback


@dataclass(frozen=True)
class Automatic:
    """`auto`: the assistant answers (a question); allowed (a permission request)."""


@dataclass(frozen=True)
class UseDefault:
    """`defaults` with a default: the question's default is the answer."""


@dataclass(frozen=True)
class Refused:
    """Nobody answers. `human_only`: an exclusive or secret question that only a human
    may answer; `no_default`: `defaults` without a default; `denied`: the mode is `deny`."""

    why: Literal["human_only", "no_default", "denied"]


@dataclass(frozen=True)
class ClientAnswered:
    """During a `defer` wait, a client answered (or dismissed) it."""

    reply: Reply


Decision = Automatic | UseDefault | Refused
Verdict = Decision | ClientAnswered


def decide(mode: DetachedFallback, *, exclusive: bool, secret: bool, has_default: bool) -> Decision:
    """What a mode that does not wait decides. A human-only (exclusive or secret) request
    is refused under every mode: neither a model nor a default is a human's answer."""
    if exclusive or secret:
        return Refused("human_only")
    if mode == "auto":
        return Automatic()
    if mode == "defaults":
        return UseDefault() if has_default else Refused("no_default")
    return Refused("denied")


async def apply_detached(
    policy: DetachedPolicy,
    wait: Callable[[float], Awaitable[Reply | None]],
    *,
    exclusive: bool = False,
    secret: bool = False,
    has_default: bool = False,
) -> Verdict:
    """The verdict of `policy` for a request no client could answer.

    Under `defer`, `wait(timeout)` keeps the request pending for clients that come later
    and returns their reply, or None when the time is up; then the fallback decides.
    """
    mode: DetachedFallback
    if policy.mode == "defer":
        reply = await wait(policy.timeout)
        if reply is not None:
            return ClientAnswered(reply)
        mode = policy.fallback
    else:
        mode = policy.mode
    return decide(mode, exclusive=exclusive, secret=secret, has_default=has_default)
