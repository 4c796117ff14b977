"""Fixtures of the fleet tests: one real Postgres per session, a database per test."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from tests.e2e.sockets import Daemons
from tests.fleet.pgserver import PgServer, running_server

_names = itertools.count(1)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    with running_server() as server:
        if isinstance(server, str):
            pytest.skip(server)
        yield server


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """The URL of a new, empty database."""
    return pg_server.create_database(f"jpd_test_{next(_names)}")


@pytest_asyncio.fixture
async def daemons() -> AsyncIterator[Daemons]:
    """Socket daemons (`jpd --listen`) started by the test, all stopped at its end."""
    running = Daemons()
    yield running
    await running.stop_all()
