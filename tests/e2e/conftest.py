"""Fixtures: an isolated data dir and config per test, and a running `jpd`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.e2e.harness import Jpd, start_jpd, write_script
from tests.e2e.sockets import Daemons

StartJpd = Callable[..., Awaitable[Jpd]]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    return tmp_path


@pytest_asyncio.fixture
async def jpd_factory(home: Path) -> AsyncIterator[StartJpd]:
    """Start daemons with a scripted model: `await jpd_factory(responses=[...])`."""
    running: list[Jpd] = []

    async def start(
        responses: list[dict[str, Any]] | None = None,
        config: str = "",
        env: dict[str, str] | None = None,
        model: str = "test/scripted",
        context_window: int | None = None,
    ) -> Jpd:
        script = write_script(home / "script.json", responses or [{"text": "ok"}])
        config_file = home / "config.toml"
        config_file.write_text(
            f'[assistant.model]\nid = "{model}"\n'
            + (f"context_window = {context_window}\n" if context_window else "")
            + f'[providers.test]\nscript = "{script}"\nrecord = "{home / "requests.jsonl"}"\n'
            + config
        )
        daemon = await start_jpd(
            {
                "JP_CONFIG": str(config_file),
                "JP_DATA_DIR": str(home / "data"),
                "JPD_LOG_LEVEL": "INFO",
                **(env or {}),
            }
        )
        running.append(daemon)
        return daemon

    yield start
    for daemon in running:
        await daemon.stop()


@pytest_asyncio.fixture
async def jpd(jpd_factory: StartJpd) -> Jpd:
    """An initialized daemon whose scripted model answers 'ok'."""
    daemon = await jpd_factory()
    await daemon.initialize()
    return daemon


@pytest_asyncio.fixture
async def daemons() -> AsyncIterator[Daemons]:
    """Socket daemons (`jpd --listen`) started by the test, all stopped at its end."""
    running = Daemons()
    yield running
    await running.stop_all()
