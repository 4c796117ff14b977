"""`jp config set KEY VALUE` / `jp config unset KEY`: edit a TOML config file in place,
its comments and layout kept (tomlkit). The value is TOML when it parses as one
(numbers, booleans, arrays, inline tables, quoted strings), else the bare text, as for
`-c`. The daemon checks the file on its next use; `jp config show` shows the result."""

from __future__ import annotations

import os
from typing import Any, TextIO

EXIT_OK, EXIT_ERROR = 0, 1


def _value(text: str) -> Any:
    import tomllib

    if "\n" in text or "\r" in text:
        return text
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text


def _keys(key: str) -> list[str]:
    parts = [part.strip().strip("\"'") for part in key.split(".")]
    if not all(parts):
        raise ValueError(f"invalid key {key!r}")
    return parts


def edit(path: str, key: str, value: Any, *, remove: bool = False) -> bool:
    """Set (or remove) `key` in the TOML file `path` (created if missing); False when
    there was nothing to remove."""
    import tomlkit

    try:
        with open(path, encoding="utf-8") as handle:
            document = tomlkit.parse(handle.read())
    except FileNotFoundError:
        document = tomlkit.document()
    *tables, last = _keys(key)
    node: Any = document
    for name in tables:
        child = node.get(name)
        if child is None:
            if remove:
                return False
            child = tomlkit.table()
            node[name] = child
        elif not hasattr(child, "get"):
            raise ValueError(f"{name} is not a table in {path}")
        node = child
    if remove:
        if last not in node:
            return False
        del node[last]
    else:
        node[last] = value
    os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8") as handle:
        handle.write(tomlkit.dumps(document))
    os.replace(partial, path)
    return True


def config_set(
    env: dict[str, str],
    cwd: str,
    key: str,
    value: str | None,
    *,
    workspace: bool = False,
    file: str | None = None,
    out: TextIO,
    err: TextIO,
) -> int:
    """`jp config set` (`value` None: `jp config unset`)."""
    from jpcli.config_files import user_config_path
    from jpcli.trust import workspace_config

    if env.get("JP_REMOTE", "").strip():
        return _on_remote(env, key, value, workspace=workspace, file=file, err=err)
    path = file or (workspace_config(cwd) if workspace else user_config_path(env))
    path = os.path.abspath(os.path.expanduser(path))
    try:
        changed = edit(path, key, None if value is None else _value(value), remove=value is None)
    except (ValueError, OSError) as exc:
        err.write(f"jp: {exc}\n")
        return EXIT_ERROR
    except Exception as exc:  # tomlkit's parse errors name the line
        err.write(f"jp: {path}: {exc}\n")
        return EXIT_ERROR
    if value is None and not changed:
        err.write(f"jp: {key} is not set in {path}\n")
        return EXIT_ERROR
    out.write(f"{path}: {key} {'removed' if value is None else 'set'}\n")
    if workspace:
        out.write("the workspace file changed: run `jp trust` to use it again\n")
    return EXIT_OK


def _on_remote(
    env: dict[str, str],
    key: str,
    value: str | None,
    *,
    workspace: bool,
    file: str | None,
    err: TextIO,
) -> int:
    """`jp config set` on the remote machine (its files, its workspace): `ssh HOST jp
    config set ...`, its output passed through."""
    import subprocess

    from jpcli.remote import parse_remote, ssh_command

    try:
        remote = parse_remote(env["JP_REMOTE"].strip())
    except ValueError as exc:
        err.write(f"jp: {exc}\n")
        return EXIT_ERROR
    args = ["config", "set" if value is not None else "unset"]
    if workspace:
        args.append("--workspace")
    if file is not None:
        args += ["--file", file]
    args += ["--", key] if value is None else ["--", key, value]
    try:
        return subprocess.run(ssh_command(remote, env, args), stdin=subprocess.DEVNULL).returncode
    except OSError as exc:
        err.write(f"jp: cannot run ssh: {exc.strerror or exc}\n")
        return EXIT_ERROR
