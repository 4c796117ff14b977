"""Checks of the images of a user message (jpd.core.prompt_images)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from jpd.core import prompt_images
from jpd.protocol.errors import InvalidParams
from jpd.protocol.turn_requests import ImageInput

PNG = base64.b64encode(b"png bytes").decode()


def sent(data: str, mime: str = "image/png") -> ImageInput:
    return ImageInput.model_validate({"mimeType": mime, "data": data})


def test_images_are_content_named_files() -> None:
    (image,) = prompt_images.decode([sent(PNG)], "anthropic/claude-x")
    assert image.ref.file.startswith("images/") and image.ref.file.endswith(".png")
    assert image.image.data == PNG and image.data == b"png bytes"


@pytest.mark.parametrize(
    ("images", "model", "problem"),
    [
        ([sent(PNG)], "local/smollm2", "the model local/smollm2 takes no images"),
        ([sent("not base64!")], "openai/gpt-x", "images[0].data is not valid base64"),
        ([sent("")], "openai/gpt-x", "images[0] is empty"),
    ],
)
def test_refusals(images: list[ImageInput], model: str, problem: str) -> None:
    with pytest.raises(InvalidParams, match=problem.replace("[", r"\[").replace("]", r"\]")):
        prompt_images.decode(images, model)


def test_no_images_is_fine_for_any_model() -> None:
    assert prompt_images.decode([], "test/scripted") == []


def test_write_keeps_one_file_per_image(tmp_path: Path) -> None:
    images = prompt_images.decode([sent(PNG), sent(PNG)], "anthropic/claude-x")
    prompt_images.write(tmp_path, images)
    files = list((tmp_path / "images").iterdir())
    assert [f.read_bytes() for f in files] == [b"png bytes"]
