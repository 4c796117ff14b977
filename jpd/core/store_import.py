"""`jpd store import`: copy the JSONL conversations of a data dir into the configured
Postgres store, so that a machine joins a fleet with its history.

Idempotent: a conversation the store has already is skipped (it may have gone on in
the fleet since). Each one is copied under its turn lease, event by event as stored
(unsanitized: recovery closes what was left open, there as here), then synced, with its
attributes (title, labels, ...). File snapshots and images stay in the data dir, where
the store's blobs are.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio

from jpd.conversation.attributes import Attributes
from jpd.conversation.jsonl.store import ConversationStore
from jpd.conversation.jsonl.threaded import ThreadedStore
from jpd.conversation.paths import default_data_dir
from jpd.conversation.port import ConversationExists, ConversationStorage
from jpd.core.configs import RequestConfigs
from jpd.core.storage import STORE_URL_ENV, open_storage


@dataclass
class Imported:
    conversations: int = 0
    events: int = 0
    skipped: int = 0


def _replaced(kept: Attributes, _current: Attributes) -> Attributes:
    return kept


async def copy_conversations(source: ConversationStore, target: ConversationStorage) -> Imported:
    """Copy every conversation of `source` (read directly: a command, no event loop to
    keep free) that `target` lacks (see the module docstring)."""
    done = Imported()
    for meta in reversed(source.list()):  # oldest first
        try:
            await target.create(meta.id)
        except ConversationExists:
            done.skipped += 1
            continue
        lease = await target.lock_turn(meta.id)
        if lease is None:  # created a moment ago by someone else: theirs
            done.skipped += 1
            continue
        try:
            events = source.load(meta.id, sanitized=False)
            for event in events:
                target.append(meta.id, event)
            await target.sync(meta.id)  # raises what failed of the appends
            kept = source.attributes(meta.id)  # title, labels, ...: none is in the log
            if kept != Attributes():
                await target.update_attributes(meta.id, functools.partial(_replaced, kept))
        finally:
            await lease.release()
        done.conversations += 1
        done.events += len(events)
    return done


async def _import(source: ConversationStore, target: ConversationStorage) -> Imported:
    try:
        await target.open()
        return await copy_conversations(source, target)
    finally:
        await target.close()


def main(argv: list[str], env: Mapping[str, str] | None = None) -> int:
    """`jpd store import [--url URL] [--data-dir DIR]`."""
    env = dict(os.environ if env is None else env)
    parser = argparse.ArgumentParser(prog="jpd store", description="manage the conversation store")
    commands = parser.add_subparsers(dest="command", required=True)
    imp = commands.add_parser(
        "import", help="copy this data dir's JSONL conversations into the Postgres store"
    )
    imp.add_argument(
        "--url", help=f"the store (default: ${STORE_URL_ENV}, else [daemon.store] url)"
    )
    imp.add_argument("--data-dir", type=Path, help="the data dir (default: $JP_DATA_DIR)")
    args = parser.parse_args(argv)
    data_dir = args.data_dir or default_data_dir(env)
    if args.url:
        env[STORE_URL_ENV] = args.url
    target = open_storage(data_dir, env, RequestConfigs(env))
    if isinstance(target, ThreadedStore):
        print(
            f"jpd store: no store configured: set {STORE_URL_ENV}, [daemon.store] url or --url",
            file=sys.stderr,
        )
        return 2
    done = anyio.run(_import, ConversationStore(data_dir), target)
    print(
        f"imported {done.conversations} conversations ({done.events} events); "
        f"{done.skipped} already in the store"
    )
    return 0
