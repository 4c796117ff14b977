"""The instruction files cache (jpd/core/instruction_files.py): a turn in a folder whose
`AGENTS.md` files are unchanged reads none of them again; any change a fresh lookup
would see (a file edited, added, removed, a workspace marker moved) is seen."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jpd.config.models import AssistantConfig
from jpd.core import instruction_files
from jpd.core.instruction_files import InstructionFiles
from jpd.core.instructions import system_prompt

ASSISTANT = AssistantConfig()


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Files written by a test are "recent" for 2 s; the rule has a test of its own.
    monkeypatch.setattr(instruction_files, "RECENT_NS", 0)
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    (root / "pkg" / "deep").mkdir(parents=True)
    (root / "AGENTS.md").write_text("Run make test.\n")
    (root / "pkg" / "AGENTS.md").write_text("Keep the API stable.\n")
    return root


def text(cache: InstructionFiles, folder: Path) -> str | None:
    """The prompt as a turn gets it: from the cache, else loaded (and checked equal to
    a lookup without any cache)."""
    prompt = cache.cached(ASSISTANT, folder)
    if prompt is None:
        prompt = cache.load(ASSISTANT, folder)
    fresh = system_prompt(ASSISTANT, folder)
    assert (prompt.text, prompt.files, prompt.skipped) == (fresh.text, fresh.files, fresh.skipped)
    return prompt.text


def test_unchanged_files_are_not_read_again(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = InstructionFiles()
    folder = workspace / "pkg" / "deep"
    assert cache.cached(ASSISTANT, folder) is None
    first = cache.load(ASSISTANT, folder)
    assert first.files == ["AGENTS.md", "pkg/AGENTS.md"]

    def no_reading(*args: object) -> None:
        raise AssertionError("read again")

    monkeypatch.setattr(instruction_files, "project_files", no_reading)
    again = cache.cached(ASSISTANT, folder)
    assert again is not None and again.text == first.text and again.files == first.files


def test_an_edited_file_is_read_again(workspace: Path) -> None:
    cache = InstructionFiles()
    folder = workspace / "pkg"
    assert "Keep the API stable." in (text(cache, folder) or "")
    (workspace / "pkg" / "AGENTS.md").write_text("Break nothing, ever.\n")
    assert cache.cached(ASSISTANT, folder) is None
    assert "Break nothing, ever." in (text(cache, folder) or "")


def test_a_file_added_or_removed_is_seen(workspace: Path) -> None:
    cache = InstructionFiles()
    folder = workspace / "pkg" / "deep"
    text(cache, folder)
    (folder / "AGENTS.md").write_text("Deep rules.\n")
    assert cache.cached(ASSISTANT, folder) is None
    assert (text(cache, folder) or "").endswith("Deep rules.\n</project_instructions>")
    (workspace / "AGENTS.md").unlink()
    assert cache.cached(ASSISTANT, folder) is None
    assert "Run make test." not in (text(cache, folder) or "")


def test_other_files_made_in_the_folders_keep_the_entry(workspace: Path) -> None:
    cache = InstructionFiles()
    folder = workspace / "pkg"
    text(cache, folder)
    (folder / "notes.txt").write_text("a tool wrote this")
    assert cache.cached(ASSISTANT, folder) is not None


def test_a_workspace_marker_moving_the_root_is_seen(workspace: Path) -> None:
    cache = InstructionFiles()
    folder = workspace / "pkg" / "deep"
    assert "Run make test." in (text(cache, folder) or "")
    (workspace / "pkg" / ".jp").mkdir()  # pkg is now the workspace root
    assert cache.cached(ASSISTANT, folder) is None
    loaded = cache.load(ASSISTANT, folder)
    assert loaded.files == ["AGENTS.md"] and "Run make test." not in (loaded.text or "")


def test_other_file_names_are_their_own_entry(workspace: Path) -> None:
    cache = InstructionFiles()
    text(cache, workspace)
    other = AssistantConfig(agents_files=["CLAUDE.md"])
    assert cache.cached(other, workspace) is None
    (workspace / "CLAUDE.md").write_text("Claude rules.\n")
    assert cache.load(other, workspace).files == ["CLAUDE.md"]
    assert cache.cached(ASSISTANT, workspace) is not None


def test_a_link_is_never_reused(workspace: Path, tmp_path: Path) -> None:
    cache = InstructionFiles()
    (workspace / "docs.md").write_text("see the docs")
    folder = workspace / "pkg"
    (folder / "AGENTS.md").unlink()
    os.symlink(workspace / "docs.md", folder / "AGENTS.md")
    assert "see the docs" in (text(cache, folder) or "")
    assert cache.cached(ASSISTANT, folder) is None  # the link's target may change unseen
    (workspace / "docs.md").write_text("see the new docs")
    assert "see the new docs" in (text(cache, folder) or "")


def test_files_just_written_are_read_each_time(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(instruction_files, "RECENT_NS", 2_000_000_000)
    cache = InstructionFiles()
    (workspace / "pkg" / "AGENTS.md").write_text("Written just now.\n")
    assert "Written just now." in (text(cache, workspace / "pkg") or "")
    assert cache.cached(ASSISTANT, workspace / "pkg") is None


def test_no_folder_or_no_file_names_need_no_lookup(workspace: Path) -> None:
    cache = InstructionFiles()
    sections = AssistantConfig(system_prompt="Base.")
    assert (prompt := cache.cached(sections, None)) is not None and prompt.text == "Base."
    off = AssistantConfig(system_prompt="Base.", agents_files=[])
    assert (prompt := cache.cached(off, workspace)) is not None and prompt.files == []
