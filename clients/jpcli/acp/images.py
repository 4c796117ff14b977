"""The images of replayed user messages (`session/load`): a `chat_request`'s `images`
name files in the conversation's folder (protocol.md 12.1), which the bridge reads when
it runs beside the daemon (the folder is `<dataDir>/conversations/<id>/`, `dataDir` from
`daemon/status`). Over `jp --remote` the files are on the other machine: the replay
says an image was there instead.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from pathlib import Path

from acp import image_block, update_user_message, update_user_message_text
from acp.schema import UserMessageChunk

MAX_IMAGE_BYTES = 20_000_000
"""Larger files are not sent to the editor again."""

ImageReader = Callable[[str, str], UserMessageChunk]
"""(file relative to the conversation's folder, mime type) -> the update that shows it."""


def image_reader(data_dir: str | None, conversation_id: str) -> ImageReader:
    """Reads a replayed message's images from the conversation's folder, confined to it;
    anything it cannot read is shown as a note."""
    folder = Path(data_dir, "conversations", conversation_id).resolve() if data_dir else None

    def read(file: str, mime_type: str) -> UserMessageChunk:
        if folder is not None:
            path = (folder / file).resolve()
            inside = str(path).startswith(str(folder) + os.sep)
            try:
                if inside and path.stat().st_size <= MAX_IMAGE_BYTES:
                    data = base64.b64encode(path.read_bytes()).decode("ascii")
                    return update_user_message(image_block(data, mime_type))
            except OSError:
                pass
        return update_user_message_text("\n[an image was sent with this message]\n")

    return read
