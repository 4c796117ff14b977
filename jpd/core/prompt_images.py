"""Images (and PDF documents) sent with a user message (`turn/start` `images`):
checked, kept as files in the conversation's folder (`images/<sha256>.<ext>`, the
`chat_request` event naming them), and given to the model in its provider's format. A
model that takes no images (or no PDFs) is refused with a clear error, never sent the
text alone."""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from jpd.conversation.events import ImageFile, ToolImage
from jpd.protocol.errors import InvalidParams
from jpd.protocol.turn_requests import IMAGE_TYPES, ImageInput

MAX_IMAGE_BYTES = 20 * 1024 * 1024
"""Bytes of one image at most (the providers' own limits are lower or equal)."""

IMAGE_PROVIDERS = frozenset({"anthropic", "openai", "google", "ollama"})
"""Providers whose models take images in user messages."""
PDF_PROVIDERS = frozenset({"anthropic", "openai", "google"})
"""Providers whose models take PDF documents in user messages."""


@dataclass(frozen=True)
class PromptImage:
    ref: ImageFile
    data: bytes

    @property
    def image(self) -> ToolImage:
        return ToolImage(mime_type=self.ref.mime_type, data=base64.b64encode(self.data).decode())


def decode(inputs: list[ImageInput], model_id: str) -> list[PromptImage]:
    """The images of a `turn/start`; -32602 for bad data or a model without images."""
    if not inputs:
        return []
    provider = model_id.split("/", 1)[0]
    if any(i.mime_type == "application/pdf" for i in inputs) and provider not in PDF_PROVIDERS:
        raise InvalidParams(
            f"the model {model_id} takes no PDFs; use a model of "
            f"{', '.join(sorted(PDF_PROVIDERS))}, or send text only"
        )
    if provider not in IMAGE_PROVIDERS:
        raise InvalidParams(
            f"the model {model_id} takes no images; use a model of "
            f"{', '.join(sorted(IMAGE_PROVIDERS))}, or send text only"
        )
    images = []
    for index, sent in enumerate(inputs):
        try:
            data = base64.b64decode(sent.data, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidParams(f"images[{index}].data is not valid base64") from None
        if not data:
            raise InvalidParams(f"images[{index}] is empty")
        if len(data) > MAX_IMAGE_BYTES:
            raise InvalidParams(f"images[{index}] is over {MAX_IMAGE_BYTES} bytes")
        name = f"images/{hashlib.sha256(data).hexdigest()}.{IMAGE_TYPES[sent.mime_type]}"
        images.append(PromptImage(ImageFile(file=name, mime_type=sent.mime_type), data))
    return images


def write(folder: Path, images: list[PromptImage]) -> None:
    """Write the images' files into the conversation's folder (blocking: call it in a
    worker thread). Content-named, so a file already there is the same image."""
    for image in images:
        path = folder / image.ref.file
        if path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        with open(partial, "wb") as out:
            out.write(image.data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, path)
