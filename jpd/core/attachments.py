"""Attachments (JP's `-a`, `jp attachment add`; protocol.md 5.5 `attachments`): text
sent with a message, read by the daemon when the turn starts.

A spec is one of:
- a file, a folder's files, or a glob (`src/**/*.py`), relative to the working folder;
  `!pattern` leaves out what an earlier spec matched;
- `http://` / `https://` URL: fetched (httpx, redirects followed, `FETCH_TIMEOUT`), an
  HTML page reduced to its text, an image or PDF (by its content type) kept as one;
- `cmd://COMMAND`: a shell command's output, run as `run_command` runs it: in the
  workspace, sandboxed read-only without network, within `COMMAND_TIMEOUT`;
- `jp://ID`: another conversation's messages.

Everything is read before anything is sent: a missing file, a failing URL or command,
or more than `MAX_TOTAL` bytes is an error naming the spec, and the turn does not start.
Files are read inside the workspace only (a glob or a link leading out is refused).

A file that is an image or a PDF (by its extension, `BINARY_TYPES`), named alone or
matched by a glob, is no text: it goes to the model as an image or document
(`Attachment.data`), up to `MAX_BINARY` bytes each; a model that takes none refuses it
before anything is sent (jpd/core/prompt_images.py).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio

from jpd.conversation.port import ConversationStorage
from jpd.protocol.errors import InvalidParams
from jpd.protocol.turn_requests import ImageInput

MAX_ONE = 256 * 1024
MAX_TOTAL = 1024 * 1024
MAX_FILES = 200
FETCH_TIMEOUT = 20.0
COMMAND_TIMEOUT = 30.0


MAX_BINARY = 20 * 1024 * 1024
"""Bytes of one image or PDF at most (as `turn/start` `images`)."""
MAX_BINARY_TOTAL = 32 * 1024 * 1024
"""Bytes of images and PDFs of one message at most (Anthropic's request limit)."""
BINARY_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".pdf": "application/pdf",
}


@dataclass
class Attachment:
    source: str
    text: str
    mime_type: str | None = None
    """An image's or PDF's type (`data` holds it then, `text` is empty)."""
    data: bytes = b""


def render(attachments: list[Attachment]) -> str:
    """The text attachments as one block of text, each in an `<attachment>` element."""
    return "\n\n".join(
        f'<attachment source="{a.source}">\n{a.text.rstrip()}\n</attachment>'
        for a in attachments
        if a.mime_type is None
    )


def binaries(attachments: list[Attachment]) -> list[ImageInput]:
    """The images and PDFs among `attachments`, as `turn/start` images."""
    import base64

    return [
        ImageInput.model_validate(
            {"mimeType": a.mime_type, "data": base64.b64encode(a.data).decode("ascii")}
        )
        for a in attachments
        if a.mime_type is not None
    ]


def _files(specs: list[str], root: Path) -> list[tuple[str, Path]]:
    """The files of the path and glob specs, `!` excludes applied, in order."""
    chosen: dict[Path, str] = {}
    real_root = root.resolve()
    for spec in specs:
        exclude = spec.startswith("!")
        pattern = spec[1:] if exclude else spec
        if os.path.isabs(os.path.expanduser(pattern)):
            raise InvalidParams(f"attachment {spec}: give a path inside the workspace")
        matches = sorted(glob.glob(pattern, root_dir=root, recursive=True))
        if not matches and not exclude:
            raise InvalidParams(f"attachment {spec}: no such file in {root}")
        for match in matches:
            path = root / match
            found = (
                [path] if not path.is_dir() else sorted(p for p in path.rglob("*") if p.is_file())
            )
            for file in found:
                real = file.resolve()
                if not real.is_relative_to(real_root):
                    raise InvalidParams(f"attachment {spec}: {match} leads out of the workspace")
                if exclude:
                    chosen.pop(real, None)
                else:
                    chosen.setdefault(real, str(file.relative_to(root)))
        if len(chosen) > MAX_FILES:
            raise InvalidParams(f"attachment {spec}: more than {MAX_FILES} files")
    return [(shown, path) for path, shown in chosen.items()]


def _read_file(shown: str, path: Path) -> Attachment:
    mime = BINARY_TYPES.get(path.suffix.lower())
    limit = MAX_BINARY if mime else MAX_ONE
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise InvalidParams(f"attachment {shown}: {exc.strerror or exc}") from None
    if mime is not None:
        if len(data) > limit:
            raise InvalidParams(f"attachment {shown}: larger than {limit} bytes")
        if not data:
            raise InvalidParams(f"attachment {shown}: an empty file")
        return Attachment(shown, "", mime, data)
    if len(data) > MAX_ONE:
        raise InvalidParams(f"attachment {shown}: larger than {MAX_ONE} bytes")
    if b"\0" in data[:8192]:
        raise InvalidParams(f"attachment {shown}: a binary file (text files only)")
    return Attachment(shown, data.decode("utf-8", errors="replace"))


async def _fetch(url: str) -> Attachment:
    import httpx

    try:
        async with (
            httpx.AsyncClient(follow_redirects=True, timeout=FETCH_TIMEOUT) as client,
            client.stream("GET", url) as response,
        ):
            if response.status_code >= 400:
                raise InvalidParams(f"attachment {url}: HTTP {response.status_code}")
            kind = response.headers.get("content-type", "")
            mime = kind.split(";")[0].strip().lower()
            binary = mime if mime in BINARY_TYPES.values() else None
            limit = MAX_BINARY if binary else 4 * MAX_ONE
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > limit:
                    raise InvalidParams(f"attachment {url}: larger than {limit} bytes")
            encoding = response.encoding or "utf-8"
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
        raise InvalidParams(f"attachment {url}: {exc.__class__.__name__}: {exc}") from None
    if binary is not None:  # an image or a PDF: as one, where the model takes it
        if not body:
            raise InvalidParams(f"attachment {url}: empty")
        return Attachment(url, "", binary, bytes(body))
    text = bytes(body).decode(encoding, errors="replace")
    if "html" in kind:
        from jpd.core.html_text import html_text  # loads with the first web page

        text = html_text(text)
    elif not kind.startswith("text/") and "json" not in kind and "xml" not in kind:
        raise InvalidParams(f"attachment {url}: {kind or 'unknown content'} is not text")
    if len(text.encode()) > MAX_ONE:
        raise InvalidParams(f"attachment {url}: its text is larger than {MAX_ONE} bytes")
    return Attachment(url, text)


async def _command(spec: str, command: str, root: Path, env: Mapping[str, str]) -> Attachment:
    """`command`'s output, sandboxed as `run_command`: read-only, no network."""
    import shutil
    import subprocess
    import tempfile

    from jpd.tools.sandbox import (
        BWRAP_FAILED,
        REFUSED,
        CageUnavailable,
        SandboxPolicy,
        prepare,
    )

    tmpdir = Path(tempfile.mkdtemp(prefix="jpd-attach-"))
    policy = SandboxPolicy(mode="read-only", network=False)
    keep = {k: v for k, v in env.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TERM")}
    shell = ["/bin/sh", "-c", command]
    try:
        launch = await anyio.to_thread.run_sync(
            lambda: prepare(policy, shell, root, [os.path.realpath(root)], tmpdir, env)
        )
    except (CageUnavailable, NotADirectoryError) as exc:
        shutil.rmtree(tmpdir, ignore_errors=True)
        raise InvalidParams(f"attachment {spec}: cannot be sandboxed here: {exc}") from None
    argv = launch.argv
    try:
        with anyio.fail_after(COMMAND_TIMEOUT):
            done = await anyio.run_process(
                argv,
                cwd=root,
                env={**keep, "TMPDIR": str(tmpdir)},
                check=False,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
    except TimeoutError:
        raise InvalidParams(f"attachment {spec}: timed out after {COMMAND_TIMEOUT:g} s") from None
    except OSError as exc:
        raise InvalidParams(f"attachment {spec}: cannot run: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    errors = done.stderr.decode(errors="replace")
    if (done.returncode == 125 and errors.startswith(REFUSED)) or (
        done.returncode == 1 and errors.startswith(BWRAP_FAILED)
    ):
        raise InvalidParams(f"attachment {spec}: cannot be sandboxed here: {errors.strip()}")
    if done.returncode != 0:
        raise InvalidParams(
            f"attachment {spec}: exit code {done.returncode}: {errors.strip()[:500]}"
        )
    if len(done.stdout) > MAX_ONE:
        raise InvalidParams(f"attachment {spec}: output larger than {MAX_ONE} bytes")
    return Attachment(spec, done.stdout.decode(errors="replace"))


async def resolve(
    specs: list[str],
    *,
    root: Path,
    env: Mapping[str, str],
    conversation_text: Callable[[str], Awaitable[str]] | None = None,
) -> list[Attachment]:
    """Every attachment of `specs`, read now (see the module doc); `InvalidParams`
    names the first that failed. `conversation_text(id)` reads `jp://ID`."""
    found: list[Attachment] = []
    paths = [s for s in specs if "://" not in s]
    binary = 0

    def count(attachment: Attachment) -> None:
        nonlocal binary
        binary += len(attachment.data)
        if binary > MAX_BINARY_TOTAL:  # checked as read: memory stays bounded
            raise InvalidParams(
                f"attachments: images and PDFs over {MAX_BINARY_TOTAL} bytes in all"
            )

    for spec in specs:
        if spec.startswith(("http://", "https://")):
            found.append(await _fetch(spec))
            count(found[-1])
        elif spec.startswith("cmd://"):
            command = spec.removeprefix("cmd://").strip()
            if not command:
                raise InvalidParams("attachment cmd://: give a command")
            found.append(await _command(spec, command, root, env))
        elif spec.startswith("jp://"):
            if conversation_text is None:
                raise InvalidParams(f"attachment {spec}: conversations cannot be read here")
            found.append(Attachment(spec, await conversation_text(spec.removeprefix("jp://"))))
        elif "://" in spec:
            raise InvalidParams(f"attachment {spec}: unknown scheme (file, http(s), cmd, jp)")
    if paths:
        files = await anyio.to_thread.run_sync(_files, paths, root)
        for shown, path in files:
            found.append(await anyio.to_thread.run_sync(_read_file, shown, path))
            count(found[-1])
    total = sum(len(a.text.encode()) for a in found if a.mime_type is None)
    if total > MAX_TOTAL:
        raise InvalidParams(f"attachments: {total} bytes in all, more than {MAX_TOTAL}")
    return found


def conversation_reader(store: ConversationStorage) -> Callable[[str], Awaitable[str]]:
    """What `jp://ID` reads: that conversation's messages, one `role: text` each."""

    async def read(conversation_id: str) -> str:
        from jpd.conversation.grep import texts
        from jpd.conversation.paths import is_valid_id
        from jpd.conversation.port import ConversationNotFound

        if not is_valid_id(conversation_id):
            raise InvalidParams(f"attachment jp://{conversation_id}: not a conversation id")
        try:
            events = await store.load(conversation_id)
        except ConversationNotFound:
            raise InvalidParams(
                f"attachment jp://{conversation_id}: no such conversation"
            ) from None
        return "\n\n".join(f"{role}: {text}" for _, role, text in texts(list(events)))

    return read
