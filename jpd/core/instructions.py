"""The system prompt of a turn: `assistant.system_prompt`, its sections and JP's
instruction items (`assistant.system_prompt_sections`, `assistant.instructions`), and
the project's `AGENTS.md` files (issue 37 item 1).

`AGENTS.md` (the open convention Codex and others read) is looked up at the
workspace root (the nearest folder above the working one holding `.jp`, `.git` or
`.hg`) and in every folder from there down to the working one; the nearest comes
last, so its word is the freshest. It is repository content: it only ever adds text to
the prompt, never changes a setting, and a file that is a link out of the workspace,
not a regular file, or larger than `MAX_FILE_BYTES` is not read (a hostile repository
could link `AGENTS.md` to a private file to have it sent to the provider).
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from jpd.config.models import AssistantConfig, ContrastExample, InstructionsConfig, SectionConfig

WORKSPACE_MARKERS = (".jp", ".git", ".hg")
MAX_FILE_BYTES = 64 * 1024


@dataclass
class SystemPrompt:
    text: str | None
    files: list[str] = field(default_factory=list)
    """The instruction files included, relative to the workspace root."""
    skipped: list[str] = field(default_factory=list)
    """`path: why` for each instruction file found and not read."""


class Seen:
    """What a lookup of instruction files saw (`project_files`), for a cache to tell
    whether it would see the same now (`jpd.core.instruction_files`)."""

    def __init__(self) -> None:
        self.markers: list[tuple[str, bool]] = []
        """Each workspace marker looked for, and whether it existed."""
        self.entries: list[tuple[str, os.stat_result | None]] = []
        """`lstat` of each folder below the root and each file looked for (None: absent)."""
        self.reusable = True
        """False when the result hangs on more than these (a link, an unreadable entry)."""


def workspace_root(folder: Path, seen: Seen | None = None) -> Path:
    """The nearest folder at or above `folder` holding a workspace marker, else `folder`."""
    for candidate in (folder, *folder.parents):
        for marker in WORKSPACE_MARKERS:
            path = candidate / marker
            exists = path.exists()
            if seen is not None:
                seen.markers.append((str(path), exists))
            if exists:
                return candidate
    return folder


def project_files(
    folder: Path, names: list[str], seen: Seen | None = None
) -> tuple[list[tuple[str, str]], list[str]]:
    """`(relative path, text)` of each instruction file from the workspace root down to
    `folder`, and `path: why` for the ones not read. Reads files: call it off the loop.
    `seen` records what the result depends on."""
    root = workspace_root(folder, seen)
    real_root = root.resolve()
    chain = [root]
    if folder != root:
        relative = folder.relative_to(root)
        for part in relative.parts:
            chain.append(chain[-1] / part)
            if seen is not None:  # a folder below the root that is a link: not reused
                with contextlib.suppress(OSError):
                    _lstat(chain[-1], seen)
    found: list[tuple[str, str]] = []
    skipped: list[str] = []
    for directory in chain:
        for name in names:
            path = directory / name
            shown = str(path.relative_to(root))
            try:
                text = _read(path, real_root, seen)
            except _Skip as exc:
                skipped.append(f"{shown}: {exc}")
                continue
            if text is not None and text.strip():
                found.append((shown, text))
    return found, skipped


def _lstat(path: Path, seen: Seen | None) -> os.stat_result | None:
    """`lstat` of `path` (None: absent), noted in `seen`; other errors are raised."""
    try:
        info = path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        info = None
    except OSError:
        if seen is not None:
            seen.reusable = False
        raise
    if seen is not None:
        seen.entries.append((str(path), info))
        if info is not None and stat.S_ISLNK(info.st_mode):
            seen.reusable = False
    return info


class _Skip(Exception):
    pass


def _read(path: Path, real_root: Path, seen: Seen | None = None) -> str | None:
    try:
        found = _lstat(path, seen)
    except OSError as exc:
        raise _Skip(f"cannot read ({exc.strerror})") from None
    if found is None:
        return None
    info = found
    real = path.resolve()
    if not real.is_relative_to(real_root):
        raise _Skip("links out of the workspace; not read")
    if stat.S_ISLNK(info.st_mode):
        info = real.stat()
    if not stat.S_ISREG(info.st_mode):
        raise _Skip("not a regular file")
    if info.st_size > MAX_FILE_BYTES:
        raise _Skip(f"larger than {MAX_FILE_BYTES} bytes; not read")
    # O_NOFOLLOW on the resolved path: a link swapped in meanwhile is not followed.
    fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise _Skip(f"larger than {MAX_FILE_BYTES} bytes; not read")
    return data.decode("utf-8", errors="replace")


def instruction_section(item: InstructionsConfig) -> SectionConfig:
    """JP's rendering of an instruction item as a section (jp_config assistant/instructions.rs)."""
    lines: list[str] = []
    if item.description:
        lines += [item.description, ""]
    lines += [f"- {entry}" for entry in item.items]
    if item.examples:
        lines += ["", "**Examples**"]
        for example in item.examples:
            lines.append("")
            if isinstance(example, ContrastExample):
                lines += [f"Good: {example.good}", f"Bad: {example.bad}"]
                if example.reason:
                    lines.append(f"Reason: {example.reason}")
            else:
                lines.append(example)
    content = "\n".join(lines).strip()
    return SectionConfig(
        content=content, tag="instruction", title=item.title, position=item.position
    )


def render_section(section: SectionConfig) -> str:
    body = section.content.strip()
    if section.title:
        body = f"# {section.title}\n\n{body}" if body else f"# {section.title}"
    if section.tag:
        return f"<{section.tag}>\n{body}\n</{section.tag}>"
    return body


def system_prompt(assistant: AssistantConfig, folder: Path | None) -> SystemPrompt:
    """The turn's system prompt; reads the instruction files under `folder` (the
    request's working folder; None: none). Reads files: call it off the event loop."""
    files: list[tuple[str, str]] = []
    skipped: list[str] = []
    if folder is not None and assistant.agents_files:
        files, skipped = project_files(folder, list(assistant.agents_files))
    return render_prompt(assistant, files, skipped)


def render_prompt(
    assistant: AssistantConfig, files: list[tuple[str, str]], skipped: list[str]
) -> SystemPrompt:
    """The system prompt of `assistant` with the instruction files `files` found."""
    sections = [*assistant.system_prompt_sections]
    sections += [instruction_section(item) for item in assistant.instructions]
    ordered = sorted(enumerate(sections), key=lambda pair: (pair[1].position, pair[0]))
    parts = [assistant.system_prompt] if assistant.system_prompt else []
    parts += [render_section(section) for _, section in ordered]
    for shown, content in files:
        parts.append(
            f'<project_instructions file="{shown}">\n{content.strip()}\n</project_instructions>'
        )
    joined = "\n\n".join(part for part in parts if part.strip()) or None
    return SystemPrompt(joined, [shown for shown, _ in files], list(skipped))
