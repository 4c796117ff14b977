"""Conformance: the detached policy (protocol.md 10.2): every row of mode x kind x exclusive
x secret x has-default x fallback, resolved from config and applied; the router applying it
to questions; and the permission gate (10.5).

End to end, against the real daemon: tests/e2e/test_inquiries.py (`deny`, `defaults`,
`auto` with exclusive questions, `defaults` using the default, deferred questions answered
by `inquiry/answer` or a later client, the `defer` timeout into the fallback),
tests/e2e/test_ask_user.py (the policy from config, `defaults` never taking the model's
own default) and tests/e2e/test_socket_inquiries.py (a client disconnecting while asked).
"""

from __future__ import annotations

import itertools
from typing import Any, get_args

import anyio
import anyio.lowlevel
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
from jpd.inquiry.router import Failed, Resolved
from jpd.protocol.detached import DetachedFallback, DetachedKind, DetachedMode
from jpd.tools.permissions import PermissionGate
from tests.conformance.inquiry_setup import Setup
from tests.unit.fakes import Clients, FakeBackend, FakeLink, replies, until_pending

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
    """protocol.md 10.2: each mode, set per kind in config, decides as the table says; `defer`
    waits `detached_timeout`, then its fallback decides."""
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
    """protocol.md 10.2: under `defer` a client that comes in time answers (or dismisses) it."""

    async def client_comes(limit: float) -> Reply | None:
        return reply

    verdict = await apply_detached(
        DetachedPolicy("defer", TIMEOUT, "auto"), client_comes, exclusive=exclusive, secret=secret
    )

    assert verdict == ClientAnswered(reply)


def test_decide_is_the_table() -> None:
    """protocol.md 10.2: a human-only (exclusive or secret) question is refused under every mode."""
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
    """protocol.md 10.2: a permission request no client answers is allowed under `auto`,
    refused under `defaults` and `deny`."""
    clients = Clients()
    config = tool(detached={kind: mode}, detached_fallback=fallback)

    assert await gate(clients).allowed(kind, "t", config, "call_1", {}) is allowed


async def test_request_override_beats_config() -> None:
    """protocol.md 10.2: the request's `detached` beats config."""
    clients = Clients()

    assert await gate(clients, "auto").allowed("run", "t", tool(detached="deny"), "c1", {})
    assert not await gate(clients, "deny").allowed("run", "t", tool(detached="auto"), "c1", {})


async def test_client_answer_and_remember() -> None:
    """protocol.md 10.5: a client allows or refuses; `remember` holds for the kind in the turn."""
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
    """protocol.md 10.3: only clients with `capabilities.permission` are asked."""
    link = FakeLink(1, permission=False, answer=replies({"allow": True}))
    permissions = gate(Clients([link]))

    assert not await permissions.allowed("run", "t", tool(detached="deny"), "c1", {})
    assert link.requests == []


async def test_dismissed_permission_is_refused() -> None:
    """protocol.md 10.3: a dismissed (-32800) permission request is refused."""
    from jpd.protocol.errors import RequestCancelled

    link = FakeLink(1, answer=replies(RequestCancelled("no")))

    assert not await gate(Clients([link])).allowed("run", "t", tool(detached="auto"), "c1", {})


# --- the router applying it to questions (protocol.md 10.2) ---------------------------------

# mode -> (outcome, reason or answer, message part), for a question anybody may answer.
EXPECTED: dict[str, tuple[str, Any, str]] = {
    "auto": ("answered", "from the model", ""),
    "defaults": ("answered", "dflt", ""),
    "deny": ("cancelled", "no_prompt_backend", "detached policy is `deny`"),
}
HUMAN_ONLY = ("cancelled", "no_prompt_backend", "no interactive terminal")


@pytest.mark.parametrize(
    ("mode", "exclusive", "secret", "via_defer"),
    list(itertools.product(["auto", "defaults", "deny"], BOOLS, BOOLS, BOOLS)),
)
async def test_detached_matrix(mode: Any, exclusive: bool, secret: bool, via_defer: bool) -> None:
    """protocol.md 10.2: what each mode (directly or as `defer`'s fallback) makes of a
    question, and what is recorded."""
    setup = Setup()
    kind = "secret" if secret else "text"

    result = await setup.ask(
        {"type": kind},
        exclusive=exclusive,
        default="dflt",
        mode="defer" if via_defer else mode,
        fallback=mode,
    )

    outcome, detail, message = HUMAN_ONLY if exclusive or secret else EXPECTED[mode]
    recorded = setup.outcome()
    assert recorded["outcome"] == outcome
    if outcome == "answered":
        assert result == Resolved(detail)
    else:
        assert isinstance(result, Failed) and message in result.message
        assert recorded["reason"] == detail
    assert setup.backend.asked == (
        [("call_1.q.1", None)] if mode == "auto" and outcome == "answered" else []
    )


async def test_auto_sends_a_non_exclusive_question_to_the_model() -> None:
    """protocol.md 10.2: under `auto` the assistant answers a question that is not
    human-only, and its answer is recorded."""
    setup = Setup(backend=FakeBackend("blue"))

    result = await setup.ask({"type": "text"}, exclusive=False, mode="auto")

    assert result == Resolved("blue")
    assert setup.backend.asked == [("call_1.q.1", None)]
    assert setup.outcome() == {
        "type": "inquiry_response",
        "id": "call_1.q.1",
        "outcome": "answered",
        "answer": "blue",
    }


@pytest.mark.parametrize("via_defer", BOOLS)
async def test_defaults_never_answers_a_secret_question_from_its_default(via_defer: bool) -> None:
    """protocol.md 10.2: under `defaults` a human-only question fails (`no_prompt_backend`)
    even with a default; a secret's default is never its answer (protocol.md 10.7)."""
    setup = Setup()

    result = await setup.ask(
        {"type": "secret"},
        default="default-s3cret",
        mode="defer" if via_defer else "defaults",
        fallback="defaults",
    )

    assert isinstance(result, Failed) and "no interactive terminal" in result.message
    assert "default-s3cret" not in result.message
    assert setup.outcome() == {
        "type": "inquiry_response",
        "id": "call_1.q.1",
        "outcome": "cancelled",
        "reason": "no_prompt_backend",
    }
    assert setup.backend.asked == []


@pytest.mark.parametrize("default", [None, 42])
async def test_defaults_without_a_usable_default(default: Any) -> None:
    """protocol.md 10.2: under `defaults` a question without a default that fits fails
    (`no_prompt_backend`)."""
    setup = Setup()

    result = await setup.ask({"type": "text"}, default=default, mode="defaults")

    assert isinstance(result, Failed) and "has no default" in result.message
    assert setup.outcome()["reason"] == "no_prompt_backend"


async def test_defer_is_answered_by_a_client_that_comes_later() -> None:
    """protocol.md 10.2: under `defer` a client that initializes later is offered the
    question and answers it."""
    setup = Setup()
    result: list[Resolved | Failed] = []

    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            # A long wait: only the newcomer can end it in time.
            result.append(await setup.ask(mode="defer", fallback="deny", timeout=30))

        tg.start_soon(ask)
        # Until it waits under `defer`: a client coming before that is asked in the first
        # round (nobody to ask), which ends at once.
        await until_pending(setup.pending, deferred=True)
        newcomer = FakeLink(5, answer=replies({"answer": True}))
        setup.clients.links.append(newcomer)
        setup.pending.client_ready(newcomer)

    assert result == [Resolved(True)]
    assert setup.outcome()["outcome"] == "answered"


@pytest.mark.parametrize("wrong", [{"allow": "yes"}, {"allow": 1}, {"allow": True, "remember": 1}])
async def test_a_permission_result_that_is_not_a_boolean_is_asked_again(
    wrong: dict[str, Any],
) -> None:
    """protocol.md 10.3: only a JSON boolean `allow` (and `remember`) is a permission
    answer; another result gets the same request again."""
    link = FakeLink(1, answer=replies(wrong, {"allow": False}))

    assert not await gate(Clients([link])).allowed("run", "t", tool(detached="auto"), "c1", {})
    assert len(link.requests) == 2


async def test_a_question_nobody_can_answer_is_listed_deferred_from_the_start() -> None:
    """protocol.md 5.16: a question that no client can answer is listed only while it waits
    under `defer` (`deferred: true`), so a client arriving at any moment is offered it in
    that wait, never in a round that ends at once."""
    setup = Setup()
    seen: set[bool] = set()

    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            await setup.ask(mode="defer", fallback="deny", timeout=0.2)
            tg.cancel_scope.cancel()

        tg.start_soon(ask)
        while True:  # every scheduling point until the wait times out
            seen.update(i.deferred for i in setup.pending.pending())
            await anyio.lowlevel.checkpoint()

    assert seen == {True}
    assert setup.outcome()["reason"] == "no_prompt_backend"
