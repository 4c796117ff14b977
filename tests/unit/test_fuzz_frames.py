"""Hostile frames, generated (protocol.md sections 2 and 3): every request with a valid
id is answered, nothing on the wire leaks a traceback or a path, no frame ends the
connection or the daemon, and both still answer a normal request afterwards.

About a minute in the test command; `python -m bench.bench_fuzz` runs many more cases.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.fuzzframes import LEAK, Harness, byte_frames, messages, running_harness

pytestmark = pytest.mark.timeout(300)

FAST = settings(
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.generate],  # shrinking a hostile frame takes minutes
)


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    with running_harness(Path(tmp_path_factory.mktemp("fuzz"))) as running:
        yield running
        assert running.still_serves()
        print("fuzz outcomes:", dict(running.outcomes))


@FAST
@given(case=messages())
def test_structured_messages_per_method(harness: Harness, case: tuple[bytes, object]) -> None:
    for reply in harness.structured(case):
        assert not LEAK.search(reply), reply


@settings(FAST, max_examples=1000)
@given(data=byte_frames())
def test_byte_level_frames(harness: Harness, data: bytes) -> None:
    for reply in harness.raw_bytes(data):
        assert not LEAK.search(reply), reply
