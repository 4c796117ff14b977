"""A hosted model call loads httpx without its command line (`jpd.httpx_cli`): the
real daemon, with Python's import timing on, runs an Anthropic turn against the fake
server; its stderr lists every module it imported."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.conftest import StartJpd
from tests.e2e.hosted import CLAUDE, anthropic_env, texts
from tests.fixtures.fake_llm_server import FakeLLMServer
from tests.fixtures.llm_wire import a_text_answer, stream_reply


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


async def test_a_model_call_imports_no_command_line_packages(
    jpd_factory: StartJpd, fake: FakeLLMServer
) -> None:
    fake.push(stream_reply(*a_text_answer("ok")))
    env = anthropic_env(fake, PYTHONPROFILEIMPORTTIME="1")
    daemon = await jpd_factory(model=CLAUDE, env=env)
    await daemon.initialize()
    _, events = await daemon.run_turn("hi")
    assert "".join(texts(events)) == "ok"
    await daemon.stop()
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in daemon.stderr.decode(errors="replace").splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    assert {"httpx", "httpx_aiohttp"} <= imported  # the call went through httpx
    roots = {name.split(".")[0] for name in imported}
    assert not roots & {"rich", "click", "pygments"}
