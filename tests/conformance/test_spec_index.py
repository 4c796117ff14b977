"""Conformance: every rule test names the protocol.md section that states its rule.

A reader goes from a sentence of the spec to its test (search for "protocol.md 10.4")
and back (each test's docstring names the section). This module keeps that link true:
a test without a docstring naming an existing section, or naming a section that was
renumbered away, fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CITED = re.compile(r"protocol\.md (\d+(?:\.\d+)*)")
HEADING = re.compile(r"^#{2,4} (\d+(?:\.\d+)*)\.? ", re.MULTILINE)


def sections() -> set[str]:
    """The numbered sections of protocol.md ("10", "10.4", "10.1.1", ...)."""
    return set(HEADING.findall((ROOT / "protocol.md").read_text(encoding="utf-8")))


def rule_tests() -> dict[str, str]:
    """Every test function of the conformance modules -> its docstring ("" if none)."""
    found: dict[str, str] = {}
    for module in sorted(HERE.glob("test_*.py")):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
                "test_"
            ):
                found[f"{module.name}::{node.name}"] = ast.get_docstring(node) or ""
    return found


def test_the_index_sees_the_spec_and_the_suite() -> None:
    """protocol.md 1: the spec is numbered and the suite has rule tests."""
    assert {"10.4", "12.2"} <= sections()
    assert len(rule_tests()) > 50


def test_every_rule_test_names_a_section_of_protocol_md_that_exists() -> None:
    """protocol.md 1: each conformance test's docstring names ("protocol.md N.N") the
    section stating its rule, and every section it names exists."""
    known = sections()
    unnamed = [name for name, doc in rule_tests().items() if not CITED.search(doc)]
    dangling = {
        name: cited
        for name, doc in rule_tests().items()
        for cited in CITED.findall(doc)
        if cited not in known
    }
    assert unnamed == [], "rule tests naming no protocol.md section"
    assert dangling == {}, "rule tests naming sections protocol.md does not have"
