"""A byte-level client for framing tests: writes exactly what a test gives it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import Any


class RawJpd:
    """`python -m jpd` on pipes, read and written frame by frame (blocking, simple)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jpd"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **env},
        )
        self.headers: list[bytes] = []
        """The header block of every frame read so far (without the blank line)."""

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        self.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        header = b""
        while not header.endswith(b"\r\n\r\n"):
            byte = self.proc.stdout.read(1)
            if not byte:
                raise EOFError("daemon closed its output")
            header += byte
        self.headers.append(header[:-4])
        length = int(header.split(b"Content-Length:")[1].split(b"\r\n")[0])
        result: dict[str, Any] = json.loads(self.proc.stdout.read(length))
        return result

    def close(self) -> tuple[int, str]:
        """Close stdin, wait, and return (exit code, stderr text)."""
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        code = self.proc.wait(30)
        assert self.proc.stderr is not None
        return code, self.proc.stderr.read().decode(errors="replace")
