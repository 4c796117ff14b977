"""Issue 35 (2): the git the workspace tools run executes nothing of the repository.

Each attack first runs plain `git` to show that it works (the marker appears), then
lists and searches with the tools: the marker stays absent and the listing is right.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from jpd.tools.builtin import BuiltinContext, default_registry, fs_grep_files
from jpd.tools.inert_git import OVERRIDES, git_environment, run_git
from jpd.tools.outcome import Success, ToolOutcome

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
    reason="git is not installed",
)

LS = ["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."]


@pytest.fixture
def hook(tmp_path: Path) -> tuple[Path, Path]:
    """A program that leaves a marker when run (the attacker's payload)."""
    marker = tmp_path / "RAN"
    script = tmp_path / "payload.sh"
    script.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
    script.chmod(0o755)
    return script, marker


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def call(root: Path, name: str, mode: str = "read-only", **arguments: Any) -> str:
    tool = default_registry().get(name)
    assert tool is not None
    ctx = BuiltinContext(
        conversation_id="c",
        tool_docs={},
        root=root,
        mode=mode,  # type: ignore[arg-type]
        env={"PATH": os.environ["PATH"], "HOME": str(root), "ANTHROPIC_API_KEY": "sk-secret"},
    )

    async def main() -> ToolOutcome:
        return await tool.run(arguments, {}, ctx)

    outcome = anyio.run(main)
    assert isinstance(outcome, Success), outcome
    return outcome.content


@pytest.fixture(params=["python", "ripgrep"])
def search(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "python":
        monkeypatch.setattr(fs_grep_files, "ripgrep", lambda: None)
    elif fs_grep_files.ripgrep() is None:
        pytest.skip("rg is not on PATH: install '.[test]'")
    return str(request.param)


def embedded_bare(at: Path, payload: Path) -> None:
    """A bare repository's layout with `core.worktree` and `core.fsmonitor` set."""
    (at / "objects").mkdir(parents=True)
    (at / "refs").mkdir()
    (at / "HEAD").write_text("ref: refs/heads/main\n")
    (at / "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n"
        f"\tfsmonitor = {payload}\n\thooksPath = {payload.parent}\n\tpager = {payload}\n"
    )


def test_a_committed_embedded_bare_repository_runs_nothing(
    tmp_path: Path, hook: tuple[Path, Path], search: str
) -> None:
    payload, marker = hook
    ws = tmp_path / "ws"
    embedded_bare(ws / "docs" / "evil", payload)
    (ws / "docs" / "evil" / "notes.txt").write_text("needle\n")
    (ws / "main.py").write_text("needle = 1\n")
    git("init", "-q", ".", cwd=ws)
    git("add", "-A", cwd=ws)
    git("commit", "-qm", "hostile", cwd=ws)
    # The attack works on plain git: listing the folder runs the payload.
    subprocess.run(["git", *LS], cwd=ws / "docs" / "evil", capture_output=True, check=False)
    assert marker.exists()
    marker.unlink()

    listed = call(ws, "fs_list_files", path="docs/evil").splitlines()
    assert set(listed) == {"docs/evil/HEAD", "docs/evil/config", "docs/evil/notes.txt"}
    assert "main.py" in call(ws, "fs_list_files").splitlines()
    found = call(ws, "fs_grep_files", pattern="needle", path="docs/evil")
    assert "docs/evil/notes.txt:1: needle" in found
    call(ws, "fs_grep_files", pattern="needle")
    assert not marker.exists()


def test_a_bare_layout_at_the_top_of_the_workspace_runs_nothing(
    tmp_path: Path, hook: tuple[Path, Path], search: str
) -> None:
    payload, marker = hook
    ws = tmp_path / "unpacked"
    embedded_bare(ws, payload)
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text("needle\n")
    subprocess.run(["git", *LS], cwd=ws / "src", capture_output=True, check=False)
    assert marker.exists()
    marker.unlink()

    assert "src/app.py" in call(ws, "fs_list_files").splitlines()
    assert "src/app.py:1: needle" in call(ws, "fs_grep_files", pattern="needle")
    assert not marker.exists()


def test_a_git_config_written_by_a_command_runs_nothing(
    tmp_path: Path, hook: tuple[Path, Path], search: str
) -> None:
    payload, marker = hook
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".gitignore").write_text("*.log\n!keep.log\n")
    (ws / "keep.log").write_text("needle\n")
    (ws / "drop.log").write_text("needle\n")
    (ws / "a.py").write_text("needle\n")
    git("init", "-q", ".", cwd=ws)
    git("add", "-A", cwd=ws)
    git("commit", "-qm", "x", cwd=ws)
    (ws / "untracked.py").write_text("needle\n")
    with (ws / ".git" / "config").open("a") as config:  # what a sandboxed command may do
        config.write(
            f"[core]\n\tfsmonitor = {payload}\n\thooksPath = {payload.parent}\n"
            f"\tpager = {payload}\n[diff]\n\texternal = {payload}\n"
        )
    subprocess.run(["git", *LS], cwd=ws, capture_output=True, check=False)
    assert marker.exists()
    marker.unlink()

    listed = call(ws, "fs_list_files").splitlines()
    # git's own rules (the negation), not the simple fallback: git still lists.
    assert set(listed) == {".gitignore", "a.py", "keep.log", "untracked.py"}
    found = call(ws, "fs_grep_files", pattern="needle").splitlines()
    assert {line.split(":")[0] for line in found} == {"a.py", "keep.log", "untracked.py"}
    assert not marker.exists()


def test_git_sees_no_secret_and_no_outside_config(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    git("init", "-q", ".", cwd=ws)
    env = git_environment(
        {"PATH": "/usr/bin", "ANTHROPIC_API_KEY": "sk", "GIT_DIR": "/elsewhere"}, ws, ws / ".git"
    )
    assert "ANTHROPIC_API_KEY" not in env
    assert env["GIT_DIR"] == str(ws / ".git") and env["GIT_WORK_TREE"] == str(ws)
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_CONFIG_GLOBAL"] == os.devnull
    assert env["GIT_CEILING_DIRECTORIES"] == str(tmp_path)
    assert "core.fsmonitor=false" in OVERRIDES and "safe.bareRepository=explicit" in OVERRIDES
    done = run_git(["config", "--get", "core.fsmonitor"], workspace=ws)
    assert done is not None and done.stdout.strip() == b"false"


def test_no_git_without_a_repository_folder(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    assert run_git(["status"], workspace=ws) is None
    (ws / ".git").symlink_to(tmp_path)  # a symlinked .git is not followed
    assert run_git(["status"], workspace=ws) is None


def test_git_looks_up_nothing_on_a_path_into_the_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "bin").mkdir(parents=True)
    env = git_environment({"PATH": f".:bin:{ws / 'bin'}:/usr/bin:"}, ws, ws / ".git")
    assert env["PATH"] == "/usr/bin"


def test_a_workspace_inside_a_repository_keeps_its_rules_and_runs_nothing(
    tmp_path: Path, hook: tuple[Path, Path], search: str
) -> None:
    """`jp` started in a subfolder of a repository: the repository's `.gitignore` rules
    still apply (git runs, pinned to that `.git`), and a bare layout inside runs nothing."""
    payload, marker = hook
    repo = tmp_path / "repo"
    ws = repo / "sub"
    embedded_bare(ws / "evil", payload)
    (repo / ".gitignore").write_text("*.log\n!keep.log\n")
    (ws / "keep.log").write_text("needle\n")
    (ws / "drop.log").write_text("needle\n")
    (ws / "a.py").write_text("needle\n")
    git("init", "-q", ".", cwd=repo)
    with (repo / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = {payload}\n")

    listed = set(call(ws, "fs_list_files").splitlines())
    assert {"a.py", "keep.log", "evil/HEAD", "evil/config"} <= listed
    assert "drop.log" not in listed
    found = call(ws, "fs_grep_files", pattern="needle").splitlines()
    assert {line.split(":")[0] for line in found} == {"a.py", "keep.log"}
    assert not marker.exists()
