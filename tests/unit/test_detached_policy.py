"""The detached policy (protocol.md section 10.2): every row of mode x kind x exclusive x
secret x has-default x fallback, resolved from config and applied; and the permission gate."""

from __future__ import annotations

import itertools
from typing import Any, get_args

import pytest

from jpd.config import Config
from jpd.config.loader import validate_layer
from jpd.config.tools import DetachedPolicy, ToolConfig
from jpd.inquiry.detached import (
    Automatic,
    ClientAnswered,
    Decision,
    Refused,
    UseDefault,
    apply_detached,
    decide,
)
from jpd.inquiry.pending import Answer, Dismissed, Reply
from jpd.protocol.detached import DetachedFallback, DetachedKind, DetachedMode
from jpd.tools.permissions import PermissionGate
from tests.unit.fakes import Clients, FakeLink, replies

TIMEOUT = 0.01

# (mode that decides, human-only, has a default) -> decision. Written out, not derived.
TABLE: dict[tuple[DetachedFallback, bool, bool], Decision] = {
    ("auto", False, False): Automatic(),
    ("auto", False, True): Automatic(),
    ("auto", True, False): Refused("human_only"),
    ("auto", True, True): Refused("human_only"),
    ("defaults", False, False): Refused("no_default"),
    ("defaults", False, True): UseDefault(),
    ("defaults", True, False): Refused("human_only"),
    ("defaults", True, True): Refused("human_only"),
    ("deny", False, False): Refused("denied"),
    ("deny", False, True): Refused("denied"),
    ("deny", True, False): Refused("human_only"),
    ("deny", True, True): Refused("human_only"),
}

BOOLS = (False, True)
ROWS = list(
    itertools.product(
        get_args(DetachedMode),
        get_args(DetachedKind),
        BOOLS,
        BOOLS,
        BOOLS,
        get_args(DetachedFallback),
    )
)


def config(tools: dict[str, Any]) -> Config:
    return validate_layer({"conversation": {"tools": tools}}, source="test")


@pytest.mark.parametrize(("mode", "kind", "exclusive", "secret", "has_default", "fallback"), ROWS)
async def test_every_row(
    mode: DetachedMode,
    kind: DetachedKind,
    exclusive: bool,
    secret: bool,
    has_default: bool,
    fallback: DetachedFallback,
) -> None:
    # The mode is set for this kind only; the other kinds keep a different one.
    other = "deny" if mode != "deny" else "auto"
    settings = {
        "detached": {k: (mode if k == kind else other) for k in get_args(DetachedKind)},
        "detached_fallback": fallback,
        "detached_timeout": TIMEOUT,
    }
    policy = config({"t": settings}).tool_config("t").detached_policy(kind)
    assert policy == DetachedPolicy(mode, TIMEOUT, fallback)
    waits: list[float] = []

    async def nobody_comes(limit: float) -> Reply | None:
        waits.append(limit)
        return None

    verdict = await apply_detached(
        policy, nobody_comes, exclusive=exclusive, secret=secret, has_default=has_default
    )

    deciding = fallback if mode == "defer" else mode
    assert verdict == TABLE[(deciding, exclusive or secret, has_default)]
    assert waits == ([TIMEOUT] if mode == "defer" else [])


@pytest.mark.parametrize(("exclusive", "secret"), list(itertools.product(BOOLS, BOOLS)))
@pytest.mark.parametrize("reply", [Answer(True, False, "client-1"), Dismissed("client-1")])
async def test_defer_returns_what_a_late_client_said(
    exclusive: bool, secret: bool, reply: Reply
) -> None:
    async def client_comes(limit: float) -> Reply | None:
        return reply

    verdict = await apply_detached(
        DetachedPolicy("defer", TIMEOUT, "auto"), client_comes, exclusive=exclusive, secret=secret
    )

    assert verdict == ClientAnswered(reply)


def test_decide_is_the_table() -> None:
    for (mode, human_only, has_default), decision in TABLE.items():
        for exclusive, secret in itertools.product(BOOLS, BOOLS):
            if (exclusive or secret) != human_only:
                continue
            assert (
                decide(mode, exclusive=exclusive, secret=secret, has_default=has_default)
                == decision
            )


# --- the permission gate (protocol.md section 10.5) -----------------------------------


def gate(clients: Clients, override: DetachedMode | None = None) -> PermissionGate:
    return PermissionGate(clients.pending(), "c", "t", detached_override=override)


def tool(**fields: Any) -> ToolConfig:
    return ToolConfig.model_validate({"detached_timeout": TIMEOUT, **fields})


@pytest.mark.parametrize(
    ("mode", "fallback", "allowed"),
    [
        ("auto", "deny", True),
        ("defaults", "auto", False),
        ("deny", "auto", False),
        ("defer", "auto", True),
        ("defer", "defaults", False),
        ("defer", "deny", False),
    ],
)
@pytest.mark.parametrize("kind", ["run", "deliver"])
async def test_permission_without_clients_follows_the_policy(
    kind: Any, mode: DetachedMode, fallback: DetachedFallback, allowed: bool
) -> None:
    clients = Clients()
    config = tool(detached={kind: mode}, detached_fallback=fallback)

    assert await gate(clients).allowed(kind, "t", config, "call_1", {}) is allowed


async def test_request_override_beats_config() -> None:
    clients = Clients()

    assert await gate(clients, "auto").allowed("run", "t", tool(detached="deny"), "c1", {})
    assert not await gate(clients, "deny").allowed("run", "t", tool(detached="auto"), "c1", {})


async def test_client_answer_and_remember() -> None:
    link = FakeLink(1, answer=replies({"allow": True, "remember": True}, {"allow": False}))
    clients = Clients([link])
    permissions = gate(clients)

    assert await permissions.allowed("run", "t", tool(), "c1", {"a": 1})
    assert await permissions.allowed("run", "t", tool(), "c2", {})  # remembered: not asked
    assert not await permissions.allowed("deliver", "t", tool(), "c2", {}, content="out")

    (m1, p1), (m2, p2) = link.requests
    assert (m1, p1["kind"], p1["arguments"], p1["inquiryId"]) == (
        "tool/permission",
        "run",
        {"a": 1},
        "c1.permission.run",
    )
    assert (m2, p2["kind"], p2["content"]) == ("tool/permission", "deliver", "out")


async def test_client_without_permission_capability_is_not_asked() -> None:
    link = FakeLink(1, permission=False, answer=replies({"allow": True}))
    permissions = gate(Clients([link]))

    assert not await permissions.allowed("run", "t", tool(detached="deny"), "c1", {})
    assert link.requests == []


async def test_dismissed_permission_is_refused() -> None:
    from jpd.protocol.errors import RequestCancelled

    link = FakeLink(1, answer=replies(RequestCancelled("no")))

    assert not await gate(Clients([link])).allowed("run", "t", tool(detached="auto"), "c1", {})
