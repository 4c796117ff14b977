"""The Postgres store makes no blocking call on the daemon's event loop: every statement
goes through psycopg's async API (`AsyncConnection`, `AsyncConnectionPool`), waits are
awaited, and no part of it runs on a thread of its own (docs/scale.md section 4)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil

import pytest

pytest.importorskip("psycopg")

import jpd.conversation.pg as pg

BLOCKING = {
    ("psycopg", "connect"): "a blocking connection",
    ("psycopg", "Connection"): "the blocking connection class",
    ("psycopg_pool", "ConnectionPool"): "the blocking pool",
    ("time", "sleep"): "a sleep that stops the loop",
    ("threading", "Thread"): "a thread of its own",
    ("threading", "Event"): "a thread's wait",
    ("threading", "Lock"): "a thread's lock",
    ("threading", "Condition"): "a thread's wait",
}


def _modules() -> list[str]:
    return [f"{pg.__name__}.{m.name}" for m in pkgutil.iter_modules(pg.__path__)]


def _uses(source: str) -> set[tuple[str, str]]:
    """(module, name) pairs the source reaches as `module.name` or imports by name."""
    found: set[tuple[str, str]] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            found.add((node.value.id, node.attr))
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.update((node.module, alias.name) for alias in node.names)
    return found


def test_the_store_is_made_of_every_module_checked() -> None:
    assert {"jpd.conversation.pg.store", "jpd.conversation.pg.writer"} <= set(_modules())


@pytest.mark.parametrize("name", _modules())
def test_no_module_of_the_pg_store_blocks(name: str) -> None:
    module = importlib.import_module(name)
    uses = _uses(inspect.getsource(module))
    blocking = {f"{m}.{n}: {why}" for (m, n), why in BLOCKING.items() if (m, n) in uses}
    assert not blocking, f"{name} blocks the event loop: {sorted(blocking)}"


def test_its_statements_are_awaited_coroutines() -> None:
    from jpd.conversation.pg.connections import PgConnections
    from jpd.conversation.pg.lease import PgLease
    from jpd.conversation.pg.queue import PgTurnQueue
    from jpd.conversation.pg.store import PgStore
    from jpd.conversation.pg.stream import PgTurnStream

    for cls, names in (
        (PgStore, ["create", "load", "sync", "lock_turn", "list", "update_attributes", "close"]),
        (PgConnections, ["run", "open"]),
        (PgLease, ["release", "renew"]),
        (PgTurnQueue, ["claim", "wait", "enqueue"]),
        (PgTurnStream, ["publish_all", "wait", "read_all", "follow"]),
    ):
        for attr in names:
            assert inspect.iscoroutinefunction(getattr(cls, attr)), f"{cls.__name__}.{attr}"
    # The one hand-off that stays a plain call: it only queues (see jpd.conversation.port).
    assert not inspect.iscoroutinefunction(PgStore.append)
