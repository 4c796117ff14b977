"""Which store the daemon's conversations live in: JSONL files under the data dir (the
embedded default), or Postgres when `JPD_STORE_URL` or `[daemon.store] url` names one
(a fleet member, docs/scale.md). The Postgres package and its driver are imported only
then, and the config is read at start-up only if the user's file mentions a store."""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping
from pathlib import Path

import platformdirs

from jpd.conversation.jsonl.threaded import ThreadedStore
from jpd.conversation.port import ConversationStorage
from jpd.core.configs import RequestConfigs

log = logging.getLogger(__name__)

STORE_URL_ENV = "JPD_STORE_URL"


def open_storage(
    data_dir: Path, env: Mapping[str, str], configs: RequestConfigs
) -> ConversationStorage:
    """The store to serve conversations from (see the module docstring)."""
    url = env.get(STORE_URL_ENV) or None
    if url is None and not _user_file_mentions_store(env):
        return ThreadedStore(data_dir)
    daemon = configs.load(None).daemon  # a broken config stops a fleet member's start
    url = url or daemon.store.url
    if not url:
        return ThreadedStore(data_dir)
    from jpd.conversation.pg import PgStore

    host = daemon.fleet.host or socket.gethostname()
    return PgStore(
        url,
        data_dir,
        host=host,
        lease_ttl=daemon.fleet.lease_ttl,
        provider_limits=daemon.fleet.provider_limits,
    )


def _user_file_mentions_store(env: Mapping[str, str]) -> bool:
    # A byte check, so that the embedded default's start-up parses no config file.
    explicit = env.get("JP_CONFIG")
    path = (
        Path(explicit).expanduser()
        if explicit
        else Path(platformdirs.user_config_dir("jp")) / "config.toml"
    )
    try:
        return b"store" in path.read_bytes()
    except OSError:
        return False
