"""What a conversation's label and title may be (protocol.md 5.26): checked where they
arrive, in params, and again where they are stored."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

LABEL_MAX = 64
TITLE_MAX = 200
_LABEL = re.compile(r"[^\s,]+")


def check_label(label: str) -> str:
    """A label: 1-64 characters, no spaces or commas (they separate labels on a line)."""
    if not _LABEL.fullmatch(label) or len(label) > LABEL_MAX:
        raise ValueError(
            f"invalid label {label[:LABEL_MAX]!r}: 1-{LABEL_MAX} characters, no spaces or commas"
        )
    return label


def check_title(title: str) -> str:
    """A title on one line (whitespace runs become one space), at most 200 characters."""
    line = " ".join(title.split())
    if not line:
        raise ValueError("a title cannot be empty")
    return line[:TITLE_MAX]


Label = Annotated[str, AfterValidator(check_label)]
Title = Annotated[str, AfterValidator(check_title)]
