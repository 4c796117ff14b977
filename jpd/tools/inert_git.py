"""Running git on a workspace without letting the workspace run anything (issue 35, 2).

A repository's own config can name programs git runs (`core.fsmonitor`, hooks, pagers,
external diffs, transports), and git finds repositories by walking up from its working
folder: an embedded bare repository (`docs/evil/{HEAD,config,objects,refs}`) or an
archive unpacked with a bare layout becomes "the repository" with a config of the
attacker's choosing. So every git the daemon runs goes through `run_git`, which:

- runs git only for a workspace in a repository with a `.git` folder (or a `gitdir:`
  file, as worktrees have): the workspace's own or its nearest parent's, and pins
  `GIT_DIR`/`GIT_WORK_TREE` to it: git itself discovers nothing, so no bare layout is
  ever taken for a repository;
- overrides on the command line (which beats every config file) each setting that
  executes a program, turns off fsmonitor, hooks, the untracked cache, lazy fetches
  and every transport;
- reads no system or global config, and sees only the allow-listed environment
  (`jpd.allowed_env`), never the daemon's own (API keys, `GIT_*` variables).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from jpd.allowed_env import base_environment

OVERRIDES: tuple[str, ...] = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.untrackedCache=false",
    "core.pager=cat",
    "core.editor=false",
    "core.askPass=",
    "core.sshCommand=false",
    "core.gitProxy=",
    "core.alternateRefsCommand=",
    "core.attributesFile=/dev/null",
    "core.excludesFile=/dev/null",
    "credential.helper=",
    "diff.external=",
    "gpg.program=false",
    "sequence.editor=false",
    "safe.bareRepository=explicit",
    "protocol.allow=never",
    "uploadpack.packObjectsHook=",
    "fetch.recurseSubmodules=false",
    "submodule.recurse=false",
    "core.virtualFilesystem=",
    "gc.auto=0",
    "maintenance.auto=false",
)
"""`-c` settings given to every git: command-line config beats the repository's."""

TIMEOUT = 60.0
"""Seconds a git run may take before it is killed (it then counts as failed). git opens
`.gitignore` files blocking: a FIFO planted as one stalls it until then."""


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _git_dir(top: Path, dot_git: Path, mode: int) -> Path | None:
    """The git folder `top/.git` stands for: itself when a folder, the folder a
    `gitdir:` file names; None for anything else (a symlink, a FIFO, ...)."""
    if stat.S_ISDIR(mode):
        found = dot_git
    elif stat.S_ISREG(mode):
        try:
            fd = os.open(dot_git, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as handle:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return None
                first = handle.read(4096).decode("utf-8").splitlines()[0]
        except (OSError, UnicodeDecodeError, IndexError):
            return None
        if not first.startswith("gitdir: "):
            return None
        found = Path(os.path.join(top, first.removeprefix("gitdir: ").strip()))
    else:
        return None
    return found if (found / "HEAD").is_file() else None


def find_repository(workspace: Path) -> tuple[Path, Path] | None:
    """(top of the work tree, git folder) of the repository `workspace` is in: the
    nearest of it and its parents with a `.git` folder (or `gitdir:` file) of its own.
    Only `.git` entries are looked at, so no bare layout (an embedded `HEAD`, `config`,
    `objects`, `refs`) is ever taken for a repository. None: not in one."""
    for top in (workspace, *workspace.parents):
        dot_git = top / ".git"
        try:
            mode = os.lstat(dot_git).st_mode
        except FileNotFoundError:
            continue
        except OSError:
            return None
        git_dir = _git_dir(top, dot_git, mode)
        return (top, git_dir) if git_dir is not None else None
    return None


def git_environment(base: Mapping[str, str], workspace: Path, git_dir: Path) -> dict[str, str]:
    """The whole environment of a git run on the work tree at `workspace`: allow-listed
    variables of `base` plus settings that pin the repository and switch off config
    from outside it."""
    env = base_environment(base)
    # Only absolute folders outside the workspace: no program git might look up on
    # PATH can be one the workspace planted ("." or a relative entry).
    env["PATH"] = os.pathsep.join(
        entry
        for entry in env.get("PATH", os.defpath).split(os.pathsep)
        if os.path.isabs(entry) and not _inside(os.path.realpath(entry), str(workspace))
    )
    env.update(
        {
            "GIT_DIR": str(git_dir),
            "GIT_WORK_TREE": str(workspace),
            "GIT_CEILING_DIRECTORIES": str(workspace.parent),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_NO_LAZY_FETCH": "1",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_PAGER": "cat",
            "GIT_PROTOCOL_FROM_USER": "0",
        }
    )
    return env


def git_command(args: Sequence[str], git: str = "git") -> list[str]:
    """`git <overrides> --no-pager <args>`."""
    command = [git, "--no-pager"]
    for setting in OVERRIDES:
        command += ["-c", setting]
    return [*command, *args]


def run_git(
    args: Sequence[str],
    *,
    workspace: Path,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = TIMEOUT,
) -> subprocess.CompletedProcess[bytes] | None:
    """Run `git args` on the repository `workspace` is in (`find_repository`), inert
    (see the module doc), in `cwd` (default: `workspace`). None when git is missing,
    `workspace` is in no repository, or git could not run; otherwise the finished
    process (any exit code). Blocking."""
    git = shutil.which("git")
    if git is None:
        return None
    workspace = Path(os.path.realpath(workspace))
    found = find_repository(workspace)
    if found is None:
        return None
    top, git_dir = found
    try:
        return subprocess.run(
            git_command(args, git),
            cwd=cwd or workspace,
            env=git_environment(env if env is not None else {}, top, git_dir),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
