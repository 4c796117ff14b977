"""Images and PDFs among attachments (jpd/core/attachments.py): read as data, not text,
within their size caps; the text limits do not count them."""

from __future__ import annotations

from pathlib import Path

import pytest

from jpd.core import attachments
from jpd.core.attachments import binaries, render, resolve
from jpd.protocol.errors import InvalidParams


async def test_images_and_pdfs_are_data_and_not_rendered_as_text(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (tmp_path / "b.PDF").write_bytes(b"%PDF-1.4\n")
    (tmp_path / "c.txt").write_text("text\n")
    found = await resolve(["*"], root=tmp_path, env={})
    assert [(a.source, a.mime_type) for a in found] == [
        ("a.png", "image/png"),
        ("b.PDF", "application/pdf"),
        ("c.txt", None),
    ]
    assert render(found) == '<attachment source="c.txt">\ntext\n</attachment>'
    assert [b.mime_type for b in binaries(found)] == ["image/png", "application/pdf"]


async def test_size_caps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attachments, "MAX_BINARY", 10)
    monkeypatch.setattr(attachments, "MAX_BINARY_TOTAL", 15)
    (tmp_path / "big.pdf").write_bytes(b"x" * 11)
    with pytest.raises(InvalidParams, match=r"attachment big\.pdf: larger than 10 bytes"):
        await resolve(["big.pdf"], root=tmp_path, env={})
    (tmp_path / "one.png").write_bytes(b"y" * 8)
    (tmp_path / "two.png").write_bytes(b"z" * 8)
    with pytest.raises(InvalidParams, match="images and PDFs over 15 bytes in all"):
        await resolve(["*.png"], root=tmp_path, env={})
    (tmp_path / "empty.png").write_bytes(b"")
    with pytest.raises(InvalidParams, match=r"attachment empty\.png: an empty file"):
        await resolve(["empty.png"], root=tmp_path, env={})
    # A binary that is not an image or PDF stays refused as before.
    (tmp_path / "blob.bin").write_bytes(b"\0\1\2")
    with pytest.raises(InvalidParams, match="a binary file"):
        await resolve(["blob.bin"], root=tmp_path, env={})
