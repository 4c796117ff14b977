"""Path confinement: every way out of the workspace is refused, before anything is read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jpd.tools.confine import PathRefused, Workspace


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace with a file and a secret next to it (outside)."""
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("x = 1\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    return ws, outside


def test_relative_paths_resolve_inside(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    w = Workspace.of(ws)
    assert w.resolve("src/a.py") == (ws / "src" / "a.py").resolve()
    assert w.resolve("src/../src/a.py") == (ws / "src" / "a.py").resolve()
    assert w.resolve("") == ws.resolve()
    assert w.resolve(None) == ws.resolve()
    assert w.show(w.resolve("src/a.py")) == "src/a.py"


def test_dotdot_is_refused(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    with pytest.raises(PathRefused, match=r"\.\."):
        Workspace.of(ws).resolve("../outside/secret.txt")
    with pytest.raises(PathRefused):
        Workspace.of(ws).resolve("src/../../outside/secret.txt")


def test_absolute_outside_is_refused_inside_is_accepted(layout: tuple[Path, Path]) -> None:
    ws, outside = layout
    w = Workspace.of(ws)
    with pytest.raises(PathRefused, match="absolute"):
        w.resolve(str(outside / "secret.txt"))
    with pytest.raises(PathRefused, match="absolute"):
        w.resolve("/etc/passwd")
    assert w.resolve(str(ws / "src" / "a.py")) == (ws / "src" / "a.py").resolve()


def test_home_expansion_is_confined(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    with pytest.raises(PathRefused):
        Workspace.of(ws).resolve("~/.ssh/id_rsa")


def test_symlink_out_is_refused(layout: tuple[Path, Path]) -> None:
    ws, outside = layout
    (ws / "link").symlink_to(outside / "secret.txt")
    (ws / "dirlink").symlink_to(outside)
    w = Workspace.of(ws)
    with pytest.raises(PathRefused, match="symlink"):
        w.resolve("link")
    with pytest.raises(PathRefused, match="symlink"):
        w.resolve("dirlink/secret.txt")
    with pytest.raises(PathRefused):
        w.resolve("dirlink/new-file.txt")  # creating through a link out is refused too


def test_symlink_inside_is_followed(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    (ws / "alias.py").symlink_to(ws / "src" / "a.py")
    assert Workspace.of(ws).resolve("alias.py") == (ws / "src" / "a.py").resolve()


def test_nul_is_refused(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    with pytest.raises(PathRefused, match="NUL"):
        Workspace.of(ws).resolve("src/a.py\0../../x")


def test_extra_roots_allow_listed_folders_only(layout: tuple[Path, Path], tmp_path: Path) -> None:
    ws, outside = layout
    other = tmp_path / "other"
    other.mkdir()
    w = Workspace.of(ws, {"roots": [str(outside)]})
    assert w.resolve(str(outside / "secret.txt")) == (outside / "secret.txt").resolve()
    assert w.resolve("../outside/secret.txt") == (outside / "secret.txt").resolve()
    with pytest.raises(PathRefused):
        w.resolve(str(other))
    with pytest.raises(PathRefused):
        w.resolve(str(outside) + "-sibling/x")  # a prefix is not a parent


def test_open_read_refuses_a_symlink_swapped_in(layout: tuple[Path, Path]) -> None:
    """TOCTOU: the name was checked, then replaced by a link out before the open."""
    ws, outside = layout
    w = Workspace.of(ws)
    target = w.resolve("src/a.py")
    target.unlink()
    target.symlink_to(outside / "secret.txt")
    with pytest.raises(PathRefused):
        w.read_bytes(target)


def test_open_read_refuses_a_folder_swapped_for_a_link(layout: tuple[Path, Path]) -> None:
    ws, outside = layout
    w = Workspace.of(ws)
    target = w.resolve("src/a.py")
    os.rename(ws / "src", ws / "src-old")
    (ws / "src").symlink_to(outside)
    (outside / "a.py").write_text("outside\n")
    with pytest.raises(PathRefused, match="outside"):
        w.read_bytes(target)


def test_write_file_replaces_a_symlink_instead_of_following_it(layout: tuple[Path, Path]) -> None:
    ws, outside = layout
    w = Workspace.of(ws)
    target = w.resolve("src/a.py")
    target.unlink()
    target.symlink_to(outside / "secret.txt")
    w.write_file(target, b"new\n")
    assert (outside / "secret.txt").read_text() == "top secret\n"
    assert not target.is_symlink() and target.read_text() == "new\n"


def test_write_file_refuses_a_parent_swapped_for_a_link(layout: tuple[Path, Path]) -> None:
    ws, outside = layout
    w = Workspace.of(ws)
    target = w.resolve("src/a.py")
    os.rename(ws / "src", ws / "src-old")
    (ws / "src").symlink_to(outside)
    with pytest.raises(PathRefused):
        w.write_file(target, b"pwned\n")
    assert not (outside / "a.py").exists()


def test_write_file_keeps_mode_and_creates_folders(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    w = Workspace.of(ws)
    script = ws / "run.sh"
    script.write_text("old\n")
    script.chmod(0o755)
    w.write_file(w.resolve("run.sh"), b"new\n")
    assert script.stat().st_mode & 0o777 == 0o755
    w.write_file(w.resolve("deep/er/f.txt"), b"x", create_dirs=True)
    assert (ws / "deep" / "er" / "f.txt").read_bytes() == b"x"
    assert sorted(p.name for p in ws.iterdir() if p.name.startswith(".")) == []


_SEGMENTS = st.sampled_from(["..", ".", "src", "a.py", "link", "dirlink", "~", "", "x", "/"])


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(_SEGMENTS, max_size=8), text=st.text(max_size=12))
def test_no_generated_path_escapes(layout: tuple[Path, Path], parts: list[str], text: str) -> None:
    ws, outside = layout
    if not (ws / "link").is_symlink():
        (ws / "link").symlink_to(outside / "secret.txt")
        (ws / "dirlink").symlink_to(outside)
    w = Workspace.of(ws)
    for candidate in ("/".join(parts), "/".join([*parts, text]), text):
        try:
            real = w.resolve(candidate)
        except PathRefused:
            continue
        assert str(real) == str(ws.resolve()) or str(real).startswith(str(ws.resolve()) + "/")
        assert str(real) == os.path.realpath(real)
