"""`jp query --schema JSON|FILE`: the answer is JSON valid against the schema, printed
alone on stdout. The daemon asks the model for it (natively where the provider can) and
checks it before the turn ends well (protocol.md 5.5 `responseSchema`); `jp` shows
nothing of the answer while it streams and prints it once the turn ended well, so a
script reading stdout never sees invalid output."""

from __future__ import annotations

import argparse
import io
import json
import os
from collections.abc import Callable
from dataclasses import replace
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jpcli.commands import Output

EXIT_ERROR = 1


def read_schema(parser: argparse.ArgumentParser, text: str) -> dict[str, Any]:
    """`--schema`'s value: a file holding the schema, else the schema's JSON itself."""
    source = text
    if not text.lstrip().startswith("{") and os.path.exists(text):
        try:
            with open(text, encoding="utf-8") as handle:
                source = handle.read()
        except (OSError, UnicodeDecodeError) as exc:
            parser.error(f"query: --schema {text}: {exc}")
    try:
        schema = json.loads(source)
    except ValueError as exc:
        parser.error(f"query: --schema: neither a file nor JSON ({exc})")
    if not isinstance(schema, dict):
        parser.error("query: --schema: a JSON schema is an object")
    return schema


def run_structured(
    query: Callable[..., int], connection: Any, *, output: Output, **kwargs: Any
) -> int:
    """Run `query` with its answer kept back, then print the answer's JSON."""
    kept = io.StringIO()
    quiet = replace(output, out=kept, out_tty=False, color=False, json=False)
    code = query(connection, output=quiet, **kwargs)
    if code != 0:
        return code
    text = kept.getvalue().strip()
    if text.startswith("```"):  # as the daemon, which checked it, reads a fenced answer
        text = text.strip("`").removeprefix("json").strip()
    try:
        value = json.loads(text)
    except ValueError:
        output.err.write("jp: the answer is not JSON\n")
        return EXIT_ERROR
    indent = 2 if output.out_tty else None
    output.out.write(json.dumps(value, ensure_ascii=False, indent=indent) + "\n")
    return code
