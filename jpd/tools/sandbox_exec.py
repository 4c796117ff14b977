"""Confines a command with the kernel, then executes it (protocol.md, "run_command").

Run as a script, never imported by the daemon:
`python -I -S sandbox_exec.py MODE NETWORK WORKSPACE TMPDIR ARGV...` (standard library
only). MODE is `workspace-write`, `read-only` or `off`; NETWORK is `1` or `0`.

- No network: a new, empty network namespace (unshare CLONE_NEWNET; as non-root inside
  a new user namespace). Unlike Landlock's TCP rules this also cuts UDP and abstract
  Unix sockets: only a down loopback exists.
- Writes: Landlock (filesystem rules; reads and execution stay allowed). Writes are
  allowed beneath the workspace (`workspace-write` only), the private TMPDIR, and to
  /dev/null.

If a restriction that was asked for cannot be applied, nothing runs: the script prints
`REFUSED` and the reason on stderr and exits 125. A sandbox is never silently dropped.
"""

from __future__ import annotations

import ctypes
import os
import sys

REFUSED = "jpd-sandbox: cannot sandbox:"
REFUSED_EXIT = 125

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_PR_SET_NO_NEW_PRIVS = 38
# x86_64 and aarch64 share these numbers (they were added after the tables unified).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

_WRITE_FILE = 1 << 1
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE_CHAR, _MAKE_DIR, _MAKE_REG, _MAKE_SOCK = 1 << 6, 1 << 7, 1 << 8, 1 << 9
_MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = 1 << 10, 1 << 11, 1 << 12
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_FILE_RIGHTS = _WRITE_FILE | _TRUNCATE


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class Refused(Exception):
    """A restriction that was asked for cannot be applied."""


def _check(result: int, what: str) -> int:
    if result < 0:
        number = ctypes.get_errno()
        raise Refused(f"{what}: {os.strerror(number)}")
    return result


def isolate_network() -> None:
    """Enter a new network namespace with no interfaces up."""
    if _libc.unshare(_CLONE_NEWNET) == 0:
        return
    uid, gid = os.getuid(), os.getgid()
    _check(_libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET), "network namespace")
    # Map ourselves to ourselves so files keep their owner inside.
    with open("/proc/self/setgroups", "w") as out:
        out.write("deny")
    with open("/proc/self/uid_map", "w") as out:
        out.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as out:
        out.write(f"{gid} {gid} 1")


def restrict_writes(writable: list[str]) -> None:
    """Landlock: no writes anywhere but beneath `writable` (and to /dev/null)."""
    abi = _libc.syscall(_SYS_CREATE_RULESET, None, 0, _LANDLOCK_CREATE_RULESET_VERSION)
    _check(abi, "Landlock (not supported by this kernel)")
    handled = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR | _MAKE_REG
    handled |= _MAKE_SOCK | _MAKE_FIFO | _MAKE_BLOCK | _MAKE_SYM
    if abi >= 2:
        handled |= _REFER
    if abi >= 3:
        handled |= _TRUNCATE
    attr = _RulesetAttr(handled)
    ruleset = _check(
        _libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.sizeof(attr), 0),
        "Landlock ruleset",
    )
    rules = [(path, handled) for path in writable] + [("/dev/null", handled & _FILE_RIGHTS)]
    for path, rights in rules:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        try:
            rule = _PathBeneath(rights, fd)
            _check(
                _libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0),
                f"Landlock rule for {path}",
            )
        finally:
            os.close(fd)
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(_libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0), "Landlock restrict_self")
    os.close(ruleset)


def main(argv: list[str]) -> None:
    mode, network, workspace, tmpdir, *command = argv
    try:
        if network != "1":
            isolate_network()
        if mode == "workspace-write":
            restrict_writes([workspace, tmpdir])
        elif mode == "read-only":
            restrict_writes([tmpdir])
        elif mode != "off":
            raise Refused(f"unknown sandbox mode {mode!r}")
    except (Refused, OSError) as exc:
        sys.stderr.write(f"{REFUSED} {exc}\n")
        sys.stderr.flush()
        os._exit(REFUSED_EXIT)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"jpd-sandbox: cannot execute {command[0]}: {exc.strerror}\n")
        sys.stderr.flush()
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
