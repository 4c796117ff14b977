"""Snapshots of a git working tree, to see what commands changed (as Codex does before
each turn): the tracked and untracked, not ignored, files are written into a private
index (seeded from the repository's own, so unchanged files are not hashed again) and
`git write-tree` names the result. The objects go to a private bare repository in the
conversation's folder, which reads the workspace repository's objects as alternates:
nothing of the workspace's repository changes, and its config (which a command in the
sandbox could have written, e.g. a clean filter) is never read by these commands.

Every git the daemon runs is inert: no system or global config, no hooks, no fsmonitor
(a repository's config could otherwise start programs), bare repositories only when
named, and only the allow-listed environment. Blocking: run in a worker thread.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from jpd.tools.inert_git import find_repository, git_command, git_environment

TIMEOUT = 60.0
MAX_FILE_BYTES = 10_000_000
"""Changed files larger than this are not kept for undo."""


class GitFailed(Exception):
    """git could not do it (no repository, no git, a timeout)."""


def _env(cwd: Path, base: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """The inert environment (jpd/tools/inert_git.py) with `extra`'s repository; without
    one, git is pointed at no repository (`init`)."""
    env = git_environment(base, cwd, cwd / ".git")
    if "GIT_DIR" not in extra:
        del env["GIT_DIR"], env["GIT_WORK_TREE"]
    env.update(extra)
    return env


def git(
    cwd: Path,
    *args: str,
    env: Mapping[str, str],
    index: Path | None = None,
    extra: Mapping[str, str] | None = None,
) -> bytes:
    """Run `git ARGS` inertly in `cwd`; its stdout, or `GitFailed`."""
    program = shutil.which("git", path=env.get("PATH") or os.defpath)
    if program is None:
        raise GitFailed("git is not installed")
    extra = dict(extra or {})
    if index is not None:
        extra["GIT_INDEX_FILE"] = str(index)
    try:
        done = subprocess.run(
            git_command(args, program),
            cwd=cwd,
            env=_env(cwd, env, extra),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitFailed(f"git {args[0]}: {exc}") from None
    if done.returncode != 0:
        raise GitFailed(f"git {args[0]}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


@dataclass(frozen=True)
class Repository:
    top: Path
    """The working tree's top folder."""
    git_dir: Path
    """The workspace repository's git folder (read: its index and objects)."""
    private: Path | None = None
    """The private bare repository the snapshots are written to."""

    def own(self, env: Mapping[str, str]) -> dict[str, str]:
        """Variables that point git at the private repository and this working tree."""
        assert self.private is not None
        return {
            "GIT_DIR": str(self.private),
            "GIT_WORK_TREE": str(self.top),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(self.git_dir / "objects"),
        }


def repository(root: Path, env: Mapping[str, str]) -> Repository | None:
    """The git working tree `root` lies in, if any: a `.git` of the workspace or its
    nearest parent, never a repository git would discover itself (a bare layout)."""
    found = find_repository(Path(os.path.realpath(root)))
    return None if found is None else Repository(*found)


def private(repo: Repository, scratch: Path, env: Mapping[str, str]) -> Repository:
    """`repo` with its private snapshot repository in `scratch` (made when missing)."""
    own = scratch / "repo"
    if not (own / "HEAD").is_file():
        scratch.mkdir(parents=True, exist_ok=True, mode=0o700)
        git(scratch, "init", "-q", "--bare", "--template=", str(own), env=env)
    return Repository(repo.top, repo.git_dir, own)


def snapshot(repo: Repository, env: Mapping[str, str]) -> str:
    """The tree id of the working tree now (tracked and untracked, not ignored)."""
    assert repo.private is not None
    index = repo.private / f"index-{os.getpid()}-{secrets.token_hex(4)}"
    real_index = repo.git_dir / "index"
    own = repo.own(env)
    try:
        if real_index.is_file():
            shutil.copyfile(real_index, index)  # a warm start: stat data is reused
        git(repo.top, "add", "--all", "--", ".", env=env, index=index, extra=own)
        return git(repo.top, "write-tree", env=env, index=index, extra=own).decode().strip()
    finally:
        index.unlink(missing_ok=True)


def changed(repo: Repository, before: str, after: str, env: Mapping[str, str]) -> list[str]:
    """Paths (relative to the top) that differ between two snapshots."""
    args = ("diff-tree", "-r", "-z", "--no-renames", "--name-only", before, after)
    out = git(repo.top, *args, env=env, extra=repo.own(env))
    return [name for name in out.decode().split("\0") if name]


def content(repo: Repository, tree: str, path: str, env: Mapping[str, str]) -> bytes | None:
    """The file `path` in the snapshot `tree`; None when it is absent there. `GitFailed`
    for what is not kept (a symlink, a submodule, a file too large)."""
    own = repo.own(env)
    out = git(repo.top, "ls-tree", "-l", "-z", tree, "--", path, env=env, extra=own)
    if not out:
        return None
    meta, _, _name = out.decode().rstrip("\0").partition("\t")
    mode, kind, sha, size = meta.split()
    if kind != "blob" or mode not in ("100644", "100755"):
        raise GitFailed(f"{path} is not a regular file ({mode})")
    if int(size) > MAX_FILE_BYTES:
        raise GitFailed(f"{path} is too large to keep")
    return git(repo.top, "cat-file", "blob", sha, env=env, extra=own)
