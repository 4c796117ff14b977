"""The import-linter contracts in pyproject.toml hold, and they catch an upward import.

The second test copies the sources to a temporary directory, adds one import that goes
against the layers, and runs `lint-imports` on the copy: it must fail and name it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    # import-linter is a test dependency (pyproject.toml, `test` extra): without it the
    # layers would go unchecked, so its absence fails rather than skips.
    assert LINT_IMPORTS.exists(), f"{LINT_IMPORTS} is missing: install the test extra"
    # The copy goes first on the path so grimp reads it, not the installed sources.
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'clients'}"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(tree / "pyproject.toml")],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _copy_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "jpd", tree / "jpd", ignore=ignore)
    shutil.copytree(ROOT / "clients" / "jpcli", tree / "clients" / "jpcli", ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_contracts_hold() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"Contracts: ([5-9]|\d\d+) kept, 0 broken\.", result.stdout), result.stdout


@pytest.mark.parametrize(
    ("module", "line", "named"),
    [
        (
            "jpd/conversation/jsonl/store.py",
            "from jpd.core import hub as _upward  # noqa: F401",
            "jpd.conversation.jsonl.store -> jpd.core.hub",
        ),
        (
            "jpd/conversation/jsonl/store.py",
            "import psycopg as _driver  # noqa: F401",
            "jpd.conversation.jsonl.store -> psycopg",
        ),
        (
            "jpd/core/daemon.py",
            "from jpd.conversation import pg as _pg  # noqa: F401",
            "jpd.core.daemon -> jpd.conversation.pg",
        ),
        (
            "jpd/core/hub.py",
            "import pygls.protocol as _pygls  # noqa: F401",
            "jpd.core.hub -> pygls",
        ),
        (
            "jpd/llm/google.py",
            "from jpd.llm import openai as _sibling  # noqa: F401",
            "jpd.llm.google -> jpd.llm.openai",
        ),
        (
            "clients/jpcli/paths.py",
            "import jpd.protocol.base as _daemon  # noqa: F401",
            "jpcli.paths -> jpd.protocol.base",
        ),
    ],
)
def test_a_forbidden_import_fails_naming_it(
    tmp_path: Path, module: str, line: str, named: str
) -> None:
    tree = _copy_tree(tmp_path)
    target = tree / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")
    result = _lint(tree)
    assert result.returncode != 0
    assert named in result.stdout, result.stdout
