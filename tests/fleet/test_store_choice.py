"""Which store a daemon opens: JSONL unless a store URL is configured (the environment
or `[daemon.store] url`), then Postgres with `[daemon.fleet]`'s host and lease TTL."""

from __future__ import annotations

from pathlib import Path

import pytest

from jpd.config.errors import ConfigError
from jpd.conversation.jsonl.threaded import ThreadedStore
from jpd.core.configs import RequestConfigs
from jpd.core.storage import open_storage
from jpd.protocol.errors import ConfigInvalid


def env_with(tmp_path: Path, toml: str | None, **more: str) -> dict[str, str]:
    config = tmp_path / "config.toml"
    if toml is not None:
        config.write_text(toml)
    return {"JP_CONFIG": str(config), "JP_DATA_DIR": str(tmp_path / "data"), **more}


def test_no_url_is_the_jsonl_store(tmp_path: Path) -> None:
    for toml in (None, '[assistant.model]\nid = "test/x"\n'):
        env = env_with(tmp_path, toml)
        store = open_storage(tmp_path / "data", env, RequestConfigs(env))
        assert isinstance(store, ThreadedStore)


async def test_a_configured_url_opens_postgres_with_the_fleet_settings(
    tmp_path: Path, pg_url: str
) -> None:
    toml = f'[daemon.store]\nurl = "{pg_url}"\n[daemon.fleet]\nhost = "h1"\nlease_ttl = 7\n'
    env = env_with(tmp_path, toml)
    store = open_storage(tmp_path / "data", env, RequestConfigs(env))
    await store.open()
    try:
        assert type(store).__name__ == "PgStore"
        assert store.takeover_interval == 1.0
        assert store.holder.startswith("h1:")  # type: ignore[attr-defined]
        assert store.lease_ttl == 7  # type: ignore[attr-defined]
    finally:
        await store.close()


def test_the_environment_wins_and_a_bad_fleet_config_is_an_error(
    tmp_path: Path, pg_url: str
) -> None:
    env = env_with(tmp_path, "[daemon.fleet]\nlease_ttl = 0\n", JPD_STORE_URL=pg_url)
    with pytest.raises((ConfigInvalid, ConfigError), match="lease_ttl"):
        open_storage(tmp_path / "data", env, RequestConfigs(env))


async def test_an_unreachable_store_is_named_without_its_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jpd.conversation.pg import connections
    from jpd.conversation.pg import store as pg_store
    from jpd.conversation.pg.rows import StoreUnavailable

    monkeypatch.setattr(connections, "RETRY_FOR", 0.5)
    url = "postgresql://jp:s3cret@127.0.0.1:1/jp"
    with pytest.raises(StoreUnavailable, match="cannot reach the conversation store") as err:
        await pg_store.PgStore(url, tmp_path, host="h").open()
    assert "s3cret" not in str(err.value)
    assert "host=127.0.0.1" in str(err.value)
