"""Config layers kept parsed while their files are unchanged.

Every request loads the layered config (each turn its own: the client's workspace and
environment may differ). Reading, parsing and validating the TOML files again each time
cost about as much as the rest of starting a turn, so the daemon keeps what it parsed,
per file, and the merged config of the files alone, and reuses them while each file's
stamp (device, inode, size, modification and change times, or its absence) is the same.
A changed file is read again on the next request.

A file changed within its filesystem's timestamp resolution of being read could keep
its stamp (the same size, and times the clock has not moved past yet): git's "racily
clean" entries. So the stamp of a file whose times are within `RECENT_NS` of the moment
it is stamped also holds a hash of its content, and its parsed layer is kept under the
hash of the very bytes that were parsed: a file just written is read (a few
microseconds for a config file), not parsed and validated again, while it is unchanged.
"""

from __future__ import annotations

import hashlib
import os
import stat as stat_mode
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from jpd.config.config import Config
from jpd.config.loader import (
    Trust,
    config_paths,
    file_layer,
    load_config,
    read_config_bytes,
    read_trusted_bytes,
)
from jpd.config.trust import trust_store_path

RECENT_NS = 2_000_000_000
"""Files changed this recently are not trusted by their times alone: 2 s is above every
common filesystem's timestamp resolution (FAT's is 2 s, ext4's a clock tick)."""

MAX_DIGESTED = 1024 * 1024
"""A recent file larger than this is not hashed on the event loop: it is read and
parsed again in a worker thread, every time, until it is older."""

MAX_ENTRIES = 64
"""Files and file sets remembered (least recently used dropped first): one daemon
serves many workspaces, each with its own file."""


class Stamp(NamedTuple):
    """One version of a file, as far as `stat` tells."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int
    digest: bytes = b""
    """For a recent file (see `RECENT_NS`), a hash of its content; else empty."""


ABSENT = Stamp(0, 0, -1, 0, 0)
"""The stamp of a file that does not exist."""


def stamp(path: Path) -> Stamp | None:
    """The file's stamp (`ABSENT` if it does not exist); None when it cannot be known
    (e.g. permission denied, or a recent file too large to hash or not a regular file)."""
    now = time.time_ns()
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return ABSENT
    except OSError:
        return None
    times = Stamp(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if max(st.st_mtime_ns, st.st_ctime_ns) <= now - RECENT_NS:
        return times
    if not stat_mode.S_ISREG(st.st_mode) or st.st_size > MAX_DIGESTED:
        return None
    try:
        return times._replace(digest=digest(path.read_bytes()))
    except OSError:
        return None


def digest(raw: bytes) -> bytes:
    """The content hash of a recent file's stamp."""
    return hashlib.blake2b(raw, digest_size=16).digest()


def _trust_stamp(workspace: Path | None, env: Mapping[str, str] | None) -> Stamp | None:
    """The trust store's stamp when a workspace config may be read, else `ABSENT`."""
    if workspace is None:
        return ABSENT
    return stamp(trust_store_path(os.environ if env is None else env))


class ConfigCache:
    """`load_config` through the parsed layers of unchanged files (thread-safe)."""

    def __init__(self) -> None:
        self._layers: OrderedDict[Path, tuple[Stamp, Config | None, bytes]] = OrderedDict()
        """Per file: its stamp, its layer and the bytes the layer was parsed from (whose
        trust a workspace file's reuse checks again)."""
        self._merged: OrderedDict[tuple[Path, ...], tuple[tuple[Stamp, ...], Config]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def cached(self, workspace: Path | None, env: Mapping[str, str] | None) -> Config | None:
        """The config of the files alone (no overrides) if none changed since it was
        loaded, else None. Costs a `stat` per file, no read: cheap enough for the event
        loop."""
        paths = tuple(config_paths(workspace, env))
        with self._lock:
            entry = self._merged.get(paths)
        if entry is None:
            return None
        stamps = (*(stamp(path) for path in paths), _trust_stamp(workspace, env))
        if stamps != entry[0]:
            return None
        with self._lock:
            if paths in self._merged:
                self._merged.move_to_end(paths)
        return entry[1]

    def load(
        self,
        *,
        workspace: Path | None = None,
        env: Mapping[str, str] | None = None,
        overrides: Sequence[tuple[str, Mapping[str, Any]]] = (),
    ) -> Config:
        """As `load_config`; files whose stamp is unchanged are not read again. Reads
        the files that changed: call it from a worker thread in async code."""
        if not overrides:
            hit = self.cached(workspace, env)
            if hit is not None:
                return hit
        # Trusting or revoking changes the store, not the workspace file: its stamp is
        # part of the key, taken before loading so a change meanwhile is not missed.
        trust = _trust_stamp(workspace, env)
        paths = tuple(config_paths(workspace, env))
        before = {path: stamp(path) for path in paths}  # for a file skipped as untrusted
        used: list[tuple[Path, Stamp | None]] = []

        def read_layer(path: Path, trusted: Trust | None) -> Config | None:
            layer, current = self._layer(path, stamp(path), trusted)
            used.append((path, current))
            return layer

        config = load_config(
            workspace=workspace, env=env, overrides=overrides, read_layer=read_layer
        )
        read = dict(used)
        current_stamps = tuple(read[path] if path in read else before[path] for path in paths)
        if not overrides and trust is not None and None not in current_stamps:
            stamps = (*(s for s in current_stamps if s is not None), trust)
            key = paths
            self._remember(self._merged, key, (stamps, config))
        return config

    def _layer(
        self, path: Path, current: Stamp | None, trusted: Trust | None
    ) -> tuple[Config | None, Stamp | None]:
        """The file's layer, and the stamp it is kept under (None: not kept). A
        workspace file (`trusted` given) is used only when the bytes its layer comes
        from are trusted: those kept with it, or those read now, once."""
        if current is not None:
            with self._lock:
                entry = self._layers.get(path)
            if entry is not None and entry[0] == current:
                if trusted is not None and entry[1] is not None and not trusted(path, entry[2]):
                    return None, current
                return entry[1], current
        raw = read_config_bytes(path) if trusted is None else read_trusted_bytes(path, trusted)
        if trusted is not None and raw is None:
            # Absent, refused or untrusted: no layer to keep. The config without it
            # may be kept under the stamp taken before this read: a file changed since
            # has another stamp (its ctime moved) and is read again.
            return None, current
        layer = file_layer(path, raw)  # raises ConfigError: a bad file is never kept
        if current is not None and current.digest:
            # The file may have changed since it was stamped: keep the layer under the
            # hash of the bytes parsed, which a later stamp matches only if they are alike.
            current = None if raw is None else current._replace(digest=digest(raw))
        if current is not None:
            self._remember(self._layers, path, (current, layer, raw or b""))
        return layer, current

    def _remember(self, table: OrderedDict[Any, Any], key: Any, value: Any) -> None:
        with self._lock:
            table[key] = value
            table.move_to_end(key)
            while len(table) > MAX_ENTRIES:
                table.popitem(last=False)
