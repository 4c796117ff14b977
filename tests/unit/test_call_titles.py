"""Tool-call titles as people write them, and the whole-file view of an edit
(jpd/tools/titles.py, jpd/tools/call_view.py)."""

from __future__ import annotations

from pathlib import Path

from jpd.tools.call_view import call_view
from jpd.tools.titles import call_title

ROOT = Path("/w")


def test_titles_of_the_builtin_tools() -> None:
    assert call_title("fs_read_file", {"path": "src/calc.py"}, ROOT) == "Read src/calc.py"
    assert (
        call_title(
            "fs_read_file", {"path": "/w/src/calc.py", "start_line": 1, "end_line": 50}, ROOT
        )
        == "Read src/calc.py (1-50)"
    )
    assert call_title("fs_modify_file", {"path": "./src/calc.py"}, ROOT) == "Edit src/calc.py"
    assert call_title("fs_create_file", {"path": "new.py"}, ROOT) == "Write new.py"
    assert (
        call_title("fs_grep_files", {"pattern": "def add", "path": "src"}, ROOT)
        == 'Search "def add" in src'
    )
    assert call_title("fs_list_files", {}, ROOT) == "List ."
    assert call_title("fs_read_file", {"path": "/etc/hosts"}, ROOT) == "Read /etc/hosts"
    assert call_title("update_plan", {"plan": []}, ROOT) == "Update plan"


def test_a_command_title_is_the_whole_command() -> None:
    command = "python -m pytest tests/test_calc.py -k 'add and not slow' -x -q --maxfail=1 " * 3
    assert call_title("run_command", {"command": command}, ROOT) == command


def test_other_tools_show_every_argument_whole() -> None:
    long = "x" * 200
    assert call_title("deploy", {"target": long}, ROOT) == f'deploy(target="{long}")'
    assert call_title("ping", {}, ROOT) == "ping"


def test_an_edit_is_shown_as_the_whole_file_with_its_line(tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    target = extra / "calc.py"
    target.write_text("def add(a, b):\n    return a - b\n")
    view = call_view(
        "fs_modify_file",
        {"path": str(target), "old_text": "a - b", "new_text": "a + b"},
        work,
        [extra],
    )
    assert view.title == f"Edit {target}"
    assert view.diff is not None
    assert view.diff.old_text == "def add(a, b):\n    return a - b\n"
    assert view.diff.new_text == "def add(a, b):\n    return a + b\n"
    assert [(loc.path, loc.line) for loc in view.locations] == [(str(target), 2)]
    # Outside every root: nothing is read, no location.
    assert call_view("fs_modify_file", {"path": str(target)}, work).locations == []


def test_an_overwrite_shows_the_old_text(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("old\n")
    view = call_view("fs_create_file", {"path": "a.txt", "content": "new\n"}, tmp_path)
    assert view.diff is not None and (view.diff.old_text, view.diff.new_text) == ("old\n", "new\n")
    fresh = call_view("fs_create_file", {"path": "b.txt", "content": "x"}, tmp_path)
    assert fresh.diff is not None and fresh.diff.old_text is None
