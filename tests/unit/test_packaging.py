"""The hand-written package list in pyproject.toml covers every package in the tree."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_is_listed() -> None:
    """A new `jpd` subpackage must be added to `[tool.setuptools] packages`."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {
        ".".join(path.parent.relative_to(ROOT).parts)
        for path in (ROOT / "jpd").rglob("__init__.py")
    }
    assert found <= listed, f"add to pyproject.toml: {sorted(found - listed)}"
    client = {
        ".".join(("jpcli", *path.parent.relative_to(ROOT / "clients" / "jpcli").parts))
        for path in (ROOT / "clients" / "jpcli").rglob("__init__.py")
    }
    assert client <= listed, f"add to pyproject.toml: {sorted(client - listed)}"
    assert config["package-dir"] == {"jpcli": "clients/jpcli"}
    assert (ROOT / "clients" / "jpcli" / "__init__.py").exists()
    client = {
        ".".join(("jpcli", *path.parent.relative_to(ROOT / "clients" / "jpcli").parts))
        for path in (ROOT / "clients" / "jpcli").rglob("__init__.py")
    }
    assert client <= listed, f"add to pyproject.toml: {sorted(client - listed)}"
