"""`jp trust`: the user's trust in workspace config files.

A workspace's `.jp/config.toml` is ignored by the daemon until trusted (protocol.md,
"Workspace config trust"). The store is `$JP_STATE_DIR/trusted.json` (default
`<XDG_STATE_HOME or ~/.local/state>/jp/trusted.json`): `key` (the workspace's real
path plus `.jp/config.toml`, never the target of a link) -> sha256 of the content, the
format jpd/config/trust.py reads (jpcli imports nothing of jpd; a test checks the two
agree). A `.jp` or `config.toml` that links outside the workspace is never trusted.
Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Mapping
from typing import TextIO

from jpcli.current import state_dir

TRUST_FILE = "trusted.json"
AGENT_FILE = "agent-written.json"
"""Beside the store: configs the agent wrote (key -> sha256), kept by the daemon."""
COPIES = "trusted-copies"
"""Beside the store: each trusted content by its sha256, so a prompt can show a diff."""
SHOWN = 4000
"""Characters of the file shown in a trust prompt."""


def store_path(env: Mapping[str, str]) -> str:
    return os.path.join(state_dir(env), TRUST_FILE)


def workspace_config(directory: str) -> str:
    """The workspace config the daemon reads for a client in `directory` (jp sends its
    cwd as the workspace root)."""
    return os.path.join(os.path.abspath(directory), ".jp", "config.toml")


def key(path: str) -> str:
    """The store's key for the workspace config `path`: its workspace's real path plus
    `.jp/config.toml` (jpd/config/trust.py `trust_key`)."""
    path = os.path.abspath(path)
    folder, name = os.path.split(path)
    workspace, jp_dir = os.path.split(folder)
    return os.path.join(os.path.realpath(workspace), jp_dir, name)


def outside(path: str) -> str | None:
    """Why `path` is not its workspace's own file (a link out of it), or None."""
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    if not (os.path.islink(folder) or os.path.islink(path)):
        return None
    real = os.path.realpath(path)
    workspace = os.path.realpath(os.path.dirname(folder))
    if os.path.commonpath([real, workspace]) != workspace:
        return f"{path} links to {real}, outside the workspace: it is never used"
    return None


def _read(path: str) -> bytes | None:
    """The file's bytes; None when unreadable or linking out of its workspace."""
    if outside(path) is not None:
        return None
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def _sha256(raw: bytes) -> str:
    import hashlib  # only when a workspace has a config: not on every `jp` run

    return hashlib.sha256(raw).hexdigest()


def file_digest(path: str) -> str | None:
    raw = _read(path)
    return None if raw is None else _sha256(raw)


def _copy_path(env: Mapping[str, str], digest: str) -> str:
    """Where the content trusted under `digest` is kept, to show what changed later."""
    return os.path.join(state_dir(env), COPIES, digest)


def _keep_copy(env: Mapping[str, str], digest: str, raw: bytes) -> None:
    target = _copy_path(env, digest)
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)


def read_store(env: Mapping[str, str], name: str = TRUST_FILE) -> dict[str, str]:
    try:
        with open(os.path.join(state_dir(env), name), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def _write_store(env: Mapping[str, str], data: dict[str, str]) -> None:
    import tempfile

    path = store_path(env)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".trusted-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
        os.replace(temp, path)  # atomic: the daemon never reads half a store
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def is_trusted(path: str, env: Mapping[str, str]) -> bool:
    digest = file_digest(path)
    return digest is not None and read_store(env).get(key(path)) == digest


def trust(path: str, env: Mapping[str, str], digest: str | None = None) -> str:
    """Trust `path` as it is now (or, given `digest`, the content with that sha256: the
    one the user was shown); returns its key. Raises OSError if it cannot be trusted."""
    problem = outside(path)
    if problem is not None:
        raise PermissionError(problem)
    raw = _read(path)
    if raw is None:
        raise FileNotFoundError(f"no config file at {path}")
    current = _sha256(raw)
    if digest is not None and digest != current:
        raise PermissionError(f"{path} changed since it was shown: not trusted")
    _keep_copy(env, current, raw)
    data = read_store(env)
    data[key(path)] = current
    _write_store(env, data)
    return key(path)


def revoke(path: str, env: Mapping[str, str]) -> bool:
    data = read_store(env)
    removed = data.pop(key(path), None) is not None
    if removed:
        _write_store(env, data)
    return removed


def agent_wrote(path: str, env: Mapping[str, str]) -> bool:
    """Whether the agent (a tool of the daemon) wrote `path` as it is now."""
    digest = file_digest(path)
    return digest is not None and read_store(env, AGENT_FILE).get(key(path)) == digest


def describe(path: str, env: Mapping[str, str]) -> tuple[str, str | None]:
    """What a trust prompt shows (jp, jp acp; nvim says the same): who wrote the file,
    what trusting it allows, and its content (or, when an earlier version was trusted
    here, the diff from it); with the sha256 of the very bytes shown (None: unreadable),
    which is what `trust` should then be given."""
    raw = _read(path)
    digest = None if raw is None else _sha256(raw)
    previous = read_store(env).get(key(path))
    lines = [f"Workspace config {path}"]
    if digest is not None and read_store(env, AGENT_FILE).get(key(path)) == digest:
        lines.append(
            "THE AGENT WROTE THIS FILE (a tool call of a conversation): trust it only if "
            "you asked for this content."
        )
    elif previous is not None:
        lines.append("It changed since you trusted it.")
    lines.append(
        "Trusting it lets it start programs (MCP servers), pick providers and servers, "
        "and change permission and sandbox settings."
    )
    text = (raw or b"").decode("utf-8", "replace")
    old = _trusted_copy(env, previous) if previous is not None and previous != digest else None
    if old is not None:
        import difflib

        diff = difflib.unified_diff(
            old.splitlines(keepends=True), text.splitlines(keepends=True), "trusted", "now"
        )
        text, fence = "".join(diff), "diff"
    else:
        fence = "toml"
    more = "\n[... more not shown ...]" if len(text) > SHOWN else ""
    lines.append(f"```{fence}\n{text[:SHOWN].rstrip()}{more}\n```")
    return "\n".join(lines), digest


def _trusted_copy(env: Mapping[str, str], digest: str) -> str | None:
    try:
        with open(_copy_path(env, digest), "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    return raw.decode("utf-8", "replace") if _sha256(raw) == digest else None


def announce_untrusted(env: Mapping[str, str], cwd: str, out: TextIO = sys.stderr) -> None:
    """The one line `jp` prints when this workspace has a config the daemon ignores."""
    path = workspace_config(cwd)
    problem = outside(path) if os.path.lexists(path) else None
    if problem is not None:
        out.write(f"jp: ignoring workspace config: {problem}\n")
    elif os.path.isfile(path) and not is_trusted(path, env):
        by = ", written by the agent," if agent_wrote(path, env) else ""
        out.write(
            f"jp: ignoring untrusted workspace config {path}{by} (run `jp trust` to use it)\n"
        )


def run(argv_path: str | None, *, revoke_it: bool, list_them: bool, env: Mapping[str, str]) -> int:
    """`jp trust [PATH] [--revoke | --list]`."""
    if list_them:
        for real, digest in sorted(read_store(env).items()):
            state = "trusted" if file_digest(real) == digest else "changed since trusted"
            sys.stdout.write(f"{real}\t{state}\n")
        return 0
    path = argv_path or workspace_config(os.getcwd())
    if os.path.isdir(path):
        path = workspace_config(path)
    if revoke_it:
        if revoke(path, env):
            sys.stdout.write(f"revoked trust in {key(path)}\n")
            return 0
        sys.stderr.write(f"jp trust: {path} was not trusted\n")
        return 1
    shown: str | None = None
    if os.path.isfile(path) and not is_trusted(path, env):
        text, shown = describe(path, env)
        sys.stderr.write(text + "\n")
        if agent_wrote(path, env) and sys.stdin.isatty():
            sys.stderr.write("Trust it? [y/N] ")
            sys.stderr.flush()
            if sys.stdin.readline().strip().lower() not in ("y", "yes"):
                sys.stderr.write("jp trust: not trusted\n")
                return 1
    try:
        real = trust(path, env, shown)
    except OSError as exc:
        sys.stderr.write(f"jp trust: {exc}\n")
        return 1
    sys.stdout.write(f"trusted {real}\n")
    return 0
