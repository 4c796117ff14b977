"""Path confinement for the workspace tools: a path argument names a file of the
workspace (or of an extra root the user listed), never anything else.

A path is relative to the workspace; an absolute one is accepted only when it lies in
an allowed root. `..` and symlinks are resolved first, and a result outside every root
is refused before anything is opened, so no tool reads an outside file even to report
on it. Resolving and opening are two steps, so a symlink swapped in between could
still redirect the open: `open_read` opens without following a final symlink and
checks the opened file's real path (`/proc/self/fd`) before reading, and `write_file`
writes through a checked directory handle and renames over the name, which replaces a
symlink rather than following it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOTS_OPTION = "roots"
"""`conversation.tools.<name>.options.roots`: extra folders the tool may use."""


class PathRefused(Exception):
    """A path the tool may not use; the message is the tool error the model sees."""


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _fd_path(fd: int) -> str:
    """The real path of an open file (Linux: `/proc/self/fd`)."""
    return os.readlink(f"/proc/self/fd/{fd}")


_SPECIAL = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
    stat.S_IFLNK: "a symlink",
}


def special_kind(mode: int) -> str | None:
    """What a file of `mode` is when it is not a regular file (None: it is one)."""
    if stat.S_ISREG(mode):
        return None
    return _SPECIAL.get(stat.S_IFMT(mode), "not a regular file")


def _refuse_special(mode: int, shown: str) -> None:
    kind = special_kind(mode)
    if kind is not None:
        raise PathRefused(
            f"{shown!r} is {kind}, not a regular file; the workspace tools only read and "
            "write regular files"
        )


@dataclass(frozen=True)
class Workspace:
    """The folders a tool call may touch: the workspace first, then extra roots
    (all real paths, symlinks resolved)."""

    roots: tuple[str, ...]
    umask: int | None = None
    """The client's umask for created files and folders (None: files 0644)."""

    @classmethod
    def of(
        cls,
        root: Path,
        options: Mapping[str, Any] | None = None,
        more: Iterable[Path] = (),
        umask: int | None = None,
    ) -> Workspace:
        """The workspace at `root` plus the `roots` option (relative ones are taken
        from the workspace; `~` is expanded) and the `more` folders (the client's
        additional directories)."""
        base = os.path.realpath(root)
        extra = (options or {}).get(ROOTS_OPTION) or []
        if isinstance(extra, str):
            extra = [extra]
        roots = [base]
        for item in extra if isinstance(extra, list) else []:
            if isinstance(item, str) and item and "\0" not in item:
                roots.append(os.path.realpath(os.path.join(base, os.path.expanduser(item))))
        roots += [os.path.realpath(folder) for folder in more]
        return cls(tuple(roots), umask)

    @property
    def root(self) -> Path:
        return Path(self.roots[0])

    def contains(self, real: str | Path) -> bool:
        """Whether the real path `real` lies in an allowed root."""
        text = str(real)
        return any(_inside(text, root) for root in self.roots)

    def resolve(self, argument: str | None, *, name: str = "path") -> Path:
        """The real path `argument` names, or `PathRefused` when it is outside every root.

        An empty or absent argument is the workspace itself.
        """
        if argument is None or argument == "":
            return self.root
        if not isinstance(argument, str):
            raise PathRefused(f"`{name}` must be a string")
        if "\0" in argument:
            raise PathRefused(f"`{name}` contains a NUL character")
        expanded = os.path.expanduser(argument) if argument.startswith("~") else argument
        joined = os.path.join(self.roots[0], expanded)  # an absolute `expanded` wins
        try:
            real = os.path.realpath(joined)
        except OSError as exc:  # e.g. a link replaced by a folder while it is read
            raise PathRefused(f"cannot resolve {name} {argument!r}: {exc.strerror}") from None
        if not self.contains(real):
            if os.path.isabs(expanded):
                why = "is an absolute path outside the workspace"
            elif not self.contains(os.path.normpath(joined)):
                why = "leads out of the workspace (`..`)"
            else:
                why = "resolves through a symlink to a place outside the workspace"
            raise PathRefused(
                f"{name} {argument!r} {why}; tools may only use files under "
                f"{self.root} (more folders can be allowed with "
                f"conversation.tools.<name>.options.roots)"
            )
        return Path(real)

    def show(self, real: str | Path) -> str:
        """`real` as the model should name it: relative to the workspace when inside."""
        text = str(real)
        if _inside(text, self.roots[0]):
            return os.path.relpath(text, self.roots[0])
        return text

    def check_open(self, fd: int, shown: str) -> None:
        """Refuse (closing `fd`) when the opened file is not in an allowed root."""
        where = _fd_path(fd)
        if not self.contains(where):
            os.close(fd)
            raise PathRefused(f"{shown!r} changed to lead outside the workspace; refused")

    def open_read(self, real: Path) -> int:
        """A read-only descriptor of the regular file at `real`, checked to be inside.

        `O_NONBLOCK` so that a FIFO swapped in after the check cannot block the open,
        and the opened file is checked again: only regular files are read (a FIFO or a
        device would block a worker thread forever, or read without end)."""
        shown = self.show(real)
        try:
            _refuse_special(os.lstat(real).st_mode, shown)
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise PathRefused(f"cannot open {shown!r}: {exc.strerror}") from None
        try:
            _refuse_special(os.fstat(fd).st_mode, shown)
        except PathRefused:
            os.close(fd)
            raise
        self.check_open(fd, shown)
        return fd

    def read_bytes(self, real: Path, limit: int | None = None) -> bytes:
        """The content of the regular file at `real` (checked as `open_read` does);
        with `limit`, a file larger than that is refused."""
        fd = self.open_read(real)
        with os.fdopen(fd, "rb") as handle:
            if limit is not None:
                size = os.fstat(handle.fileno()).st_size
                if size > limit:
                    raise PathRefused(
                        f"{self.show(real)!r} is {size} bytes, too large (limit {limit})"
                    )
                return handle.read(limit + 1)[:limit]
            return handle.read()

    def _root_for(self, real: Path) -> str:
        text = str(real)
        inside = [root for root in self.roots if _inside(text, root)]
        if not inside:
            raise PathRefused(f"{self.show(real)!r} is outside the workspace")
        return max(inside, key=len)

    def _open_dir(self, real: Path, *, create: bool) -> int:
        """A descriptor of the folder `real`, opened one level at a time from its root
        with `O_NOFOLLOW` (and made with `mkdir` relative to its parent's descriptor
        when `create`): a symlink swapped in at any level is refused, never followed,
        so no folder is made or written outside the workspace."""
        root = self._root_for(real)
        parts = [p for p in os.path.relpath(real, root).split(os.sep) if p not in ("", ".")]
        if ".." in parts:
            raise PathRefused(f"{self.show(real)!r} leads out of the workspace")
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise PathRefused(f"cannot open folder {root!r}: {exc.strerror}") from None
        done = root
        try:
            for part in parts:
                done = os.path.join(done, part)
                try:
                    child = os.open(part, flags, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    made = True
                    try:
                        os.mkdir(part, 0o777, dir_fd=fd)
                    except FileExistsError:  # made meanwhile: opened next
                        made = False
                    child = os.open(part, flags, dir_fd=fd)
                    if made and self.umask is not None:
                        # mkdir's mode is masked by the daemon's own umask (077).
                        os.fchmod(child, 0o777 & ~self.umask)
                os.close(fd)
                fd = child
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                why = "is not a folder (or was replaced by a symlink)"
                raise PathRefused(f"{self.show(done)!r} {why}; refused") from None
            what = "create" if create else "open"
            raise PathRefused(f"cannot {what} folder {self.show(done)!r}: {exc.strerror}") from None
        self.check_open(fd, self.show(real))
        return fd

    def write_file(self, real: Path, data: bytes, *, create_dirs: bool = False) -> None:
        """Replace (or create) the file at `real` with `data`, atomically: written to a
        temporary name in the checked folder, then renamed over the name. The old
        file's permission bits are kept."""
        dfd = self._open_dir(real.parent, create=create_dirs)
        try:
            try:
                mode = os.stat(real.name, dir_fd=dfd, follow_symlinks=False).st_mode & 0o7777
            except FileNotFoundError:
                mode = 0o644 if self.umask is None else 0o666 & ~self.umask
            temp = f".{real.name}.jp-{secrets.token_hex(4)}"
            fd = os.open(
                temp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
                dir_fd=dfd,
            )
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fchmod(handle.fileno(), mode)
                os.rename(temp, real.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=dfd)
                raise
        finally:
            os.close(dfd)

    def remove_file(self, real: Path) -> None:
        """Remove the file at `real` (a symlink there is removed, not followed)."""
        dfd = self._open_dir(real.parent, create=False)
        try:
            os.unlink(real.name, dir_fd=dfd)
        finally:
            os.close(dfd)
