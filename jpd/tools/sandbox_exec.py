"""Confines a command with the kernel, then executes it (protocol.md, "run_command").

Run as a script, never imported by the daemon, standard library only:
`python -I -S sandbox_exec.py KEY=VALUE... -- ARGV...`. In the full cage it runs inside
bubblewrap's namespaces (`namespace_launcher.py` builds that command) and adds the
layers bubblewrap does not give; in the `landlock` cage it is the whole cage.

- `mode=workspace-write|read-only|off`, `write=PATH` (repeatable): Landlock write rules.
  Writes (creating, writing, truncating, removing, renaming, linking) are allowed beneath
  the `write` paths and to /dev/null only. Needs Landlock ABI 3 (TRUNCATE): without it
  `truncate(2)` would empty any file of the user, so an older kernel is refused.
- `hide=PATH` (repeatable): files there cannot be read (Landlock READ_FILE granted on
  everything else), for the `landlock` cage, which has no mounts to hide them with.
- `level=namespaces|landlock`: in `landlock` (no namespaces) Landlock must also scope
  signals and abstract Unix sockets to the call (ABI 6), and seccomp refuses what
  Landlock leaves open outside the workspace: chmod, chown, utime and xattr calls.
- `net=0|1`: with `net=0` in `landlock`, seccomp refuses every socket but AF_UNIX (the
  namespaces cage has a network namespace instead).
- Unix sockets: unless `mode=off`, seccomp refuses `socket(AF_UNIX, ...)` (pathname and
  abstract alike, as Anthropic's sandbox-runtime does): nothing in the cage can reach
  jpd's socket, an ssh or gpg agent, or a desktop bus. `socketpair` stays allowed.
- `nproc=N`, `fsize=N`: RLIMIT_NPROC and RLIMIT_FSIZE (0: left as they are).

If any of it cannot be applied, nothing runs: the script prints `REFUSED` and the reason
on stderr and exits 125. A cage is never silently lowered.
"""

from __future__ import annotations

import ctypes
import os
import resource
import struct
import sys

REFUSED = "jpd-sandbox: cannot sandbox:"
REFUSED_EXIT = 125

_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
# x86_64 and aarch64 share these numbers (they were added after the tables unified).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

_EXECUTE, _WRITE_FILE, _READ_FILE = 1 << 0, 1 << 1, 1 << 2
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE_CHAR, _MAKE_DIR, _MAKE_REG, _MAKE_SOCK = 1 << 6, 1 << 7, 1 << 8, 1 << 9
_MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = 1 << 10, 1 << 11, 1 << 12
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1, 2

_AF_UNIX, _EPERM = 1, 1
_RET_ALLOW, _RET_ERRNO, _RET_KILL = 0x7FFF0000, 0x00050000 | _EPERM, 0x80000000
_LD_ABS_W, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
# What Landlock leaves open outside the workspace: mode, owner, times and ACLs (xattrs).
_LOCKDOWN_X86_64 = dict(
    chmod=90, fchmod=91, fchmodat=268, fchmodat2=452, chown=92, fchown=93, lchown=94,
    fchownat=260, utime=132, utimes=235, futimesat=261, utimensat=280, setxattr=188,
    lsetxattr=189, fsetxattr=190, removexattr=197, lremovexattr=198, fremovexattr=199,
    setxattrat=463, removexattrat=466,
)  # fmt: skip
_LOCKDOWN_AARCH64 = dict(
    fchmod=52, fchmodat=53, fchmodat2=452, fchown=55, fchownat=54, utimensat=88,
    setxattr=5, lsetxattr=6, fsetxattr=7, removexattr=14, lremovexattr=15,
    fremovexattr=16, setxattrat=463, removexattrat=466,
)  # fmt: skip
_ARCH = {
    # machine: (AUDIT_ARCH, socket(2), the lockdown syscalls)
    "x86_64": (0xC000003E, 41, tuple(_LOCKDOWN_X86_64.values())),
    "aarch64": (0xC00000B7, 198, tuple(_LOCKDOWN_AARCH64.values())),
}
_IO_URING = (425, 426, 427)
"""io_uring can open sockets without socket(2): refused whenever sockets are filtered."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


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


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when there is none."""
    abi = _libc.syscall(_SYS_CREATE_RULESET, None, 0, _LANDLOCK_CREATE_RULESET_VERSION)
    return abi if abi > 0 else 0


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def read_grants(hidden: list[str], keep: list[str]) -> list[str]:
    """What may be read so that nothing in `hidden` can be: every entry on the way from
    / to a hidden path but the hidden one, each granted with all it holds. A hidden path
    inside `keep` (a writable root) stays readable; one holding a `keep` path is hidden
    around it. Folder listings stay allowed (READ_DIR is not restricted): names show,
    contents do not. Empty: nothing to hide."""
    keep = [os.path.realpath(path) for path in keep]
    hidden = [os.path.realpath(path) for path in hidden if os.path.lexists(path)]
    hidden = [path for path in hidden if not any(_within(path, root) for root in keep)]
    if not hidden:
        return []
    lead: set[str] = set()
    for path in hidden + [k for k in keep if any(_within(k, h) for h in hidden)]:
        while path != "/":
            path = os.path.dirname(path)
            lead.add(path)
    grants: list[str] = []

    def walk(folder: str, concealed: bool) -> None:
        try:
            names = os.listdir(folder)
        except OSError:
            return  # cannot list it: nothing in it is granted
        for name in names:
            child = os.path.join(folder, name)
            if child in keep:
                grants.append(child)
            elif child in lead:
                walk(child, concealed or child in hidden)
            elif not concealed and child not in hidden:
                real = os.path.realpath(child)
                # A link into (or above) a hidden path would grant it: left out.
                if not any(_within(real, h) or _within(h, real) for h in hidden):
                    grants.append(child)

    walk("/", False)
    return grants


def restrict(
    writable: list[str], *, writes: bool, scopes: bool, hidden: list[str] | None = None
) -> None:
    """Landlock: no writes but beneath `writable` (and to /dev/null) when `writes`;
    signals and abstract Unix sockets only within the call when `scopes`; no reading
    of files in `hidden` (see `read_grants`)."""
    abi = landlock_abi()
    if abi == 0:
        raise Refused("Landlock is not available (Linux 5.13+ with Landlock enabled)")
    if writes and abi < 3:
        raise Refused(
            f"Landlock ABI {abi} cannot stop truncate(2) of files outside the workspace"
            " (ABI 3, Linux 6.2, needed)"
        )
    if scopes and abi < 6:
        raise Refused(
            f"Landlock ABI {abi} cannot keep signals and abstract Unix sockets inside the"
            " command (ABI 6, Linux 6.12, needed without namespaces)"
        )
    handled = 0
    if writes:
        handled = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR
        handled |= _MAKE_REG | _MAKE_SOCK | _MAKE_FIFO | _MAKE_BLOCK | _MAKE_SYM
        handled |= _REFER | _TRUNCATE
    readable = read_grants(hidden or [], writable)
    if readable:
        handled |= _READ_FILE
    attr = _RulesetAttr(handled, 0, (_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if abi >= 6 else 0)
    size = ctypes.sizeof(attr) if abi >= 6 else 8  # older kernels reject unknown fields
    ruleset = _check(
        _libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), size, 0), "Landlock ruleset"
    )
    rules = [(path, handled) for path in writable] if writes else []
    if writes:
        rules.append(("/dev/null", handled & _FILE_RIGHTS))
    required = len(rules)
    rules += [(path, _READ_FILE) for path in readable]
    for index, (path, rights) in enumerate(rules):
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            if index < required:
                raise
            continue  # a read grant for something gone since the walk
        try:
            if not os.path.isdir(f"/proc/self/fd/{fd}"):
                rights &= _FILE_RIGHTS  # a file takes file rights only
            rule = _PathBeneath(rights, fd)
            _check(
                _libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0),
                f"Landlock rule for {path}",
            )
        finally:
            os.close(fd)
    _check(_libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0), "Landlock restrict_self")
    os.close(ruleset)


def seccomp_program(*, deny_unix: bool, deny_inet: bool, lockdown: bool) -> bytes:
    """A seccomp BPF program (classic BPF, as `struct sock_filter[]`) for this machine."""
    machine = os.uname().machine
    if machine not in _ARCH:
        raise Refused(f"no seccomp filter for the {machine} architecture")
    arch, socket_nr, lockdown_nrs = _ARCH[machine]
    # (code, jump-if-true label, jump-if-false label, k); labels resolve to offsets.
    code: list[tuple[int, str | None, str | None, int]] = [
        (_LD_ABS_W, None, None, 4),  # seccomp_data.arch
        (_JEQ, None, "kill", arch),  # a 32-bit syscall entry would bypass the numbers
        (_LD_ABS_W, None, None, 0),  # seccomp_data.nr
    ]
    if machine == "x86_64":
        code.append((_JGE, "deny", None, 0x40000000))  # the x32 ABI
    denied = (lockdown_nrs if lockdown else ()) + (_IO_URING if deny_unix or deny_inet else ())
    code += [(_JEQ, "deny", None, number) for number in denied]
    if deny_unix or deny_inet:
        code.append((_JEQ, "socket", None, socket_nr))
    code.append((_RET, None, None, _RET_ALLOW))
    labels = {"socket": len(code)}
    code.append((_LD_ABS_W, None, None, 16))  # the low half of args[0]: the family
    if deny_unix and deny_inet:
        code.append((_RET, None, None, _RET_ERRNO))
    elif deny_unix:
        code.append((_JEQ, "deny", "allow", _AF_UNIX))
    else:
        code.append((_JEQ, "allow", "deny", _AF_UNIX))
    labels.update(allow=len(code), deny=len(code) + 1, kill=len(code) + 2)
    code += [(_RET, None, None, _RET_ALLOW), (_RET, None, None, _RET_ERRNO)]
    code.append((_RET, None, None, _RET_KILL))
    program = b""
    for index, (op, true, false, k) in enumerate(code):
        jt = labels[true] - index - 1 if true else 0
        jf = labels[false] - index - 1 if false else 0
        program += struct.pack("=HBBI", op, jt, jf, k)
    return program


def apply_seccomp(program: bytes) -> None:
    class _Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    prog = _Fprog(len(program) // 8, program)
    _check(_libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp")


def _limit(which: int, value: int, what: str) -> None:
    if value <= 0:
        return
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    try:
        resource.setrlimit(which, (value, value))
    except (ValueError, OSError) as exc:
        raise Refused(f"{what} limit: {exc}") from exc


def confine(options: dict[str, list[str]]) -> None:
    """Apply the cage `options` describe to this process (refuses with `Refused`)."""

    def one(key: str, default: str) -> str:
        return (options.get(key) or [default])[-1]

    mode, level, network = (
        one("mode", "workspace-write"),
        one("level", "namespaces"),
        one("net", "0"),
    )
    if mode not in ("workspace-write", "read-only", "off"):
        raise Refused(f"unknown sandbox mode {mode!r}")
    if level not in ("namespaces", "landlock"):
        raise Refused(f"unknown cage level {level!r}")
    _limit(resource.RLIMIT_NPROC, int(one("nproc", "0")), "process")
    _limit(resource.RLIMIT_FSIZE, int(one("fsize", "0")), "file size")
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    caged = mode != "off"
    landlock_only = level == "landlock"
    if caged:
        hidden = options.get("hide", [])
        restrict(options.get("write", []), writes=True, scopes=landlock_only, hidden=hidden)
    deny_inet = landlock_only and network != "1"
    if caged or deny_inet:
        program = seccomp_program(
            deny_unix=caged, deny_inet=deny_inet, lockdown=caged and landlock_only
        )
        apply_seccomp(program)


def parse(argv: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """`KEY=VALUE... -- ARGV...` -> options (each key's values) and the command."""
    if "--" not in argv:
        raise Refused("usage: sandbox_exec.py KEY=VALUE... -- COMMAND...")
    split = argv.index("--")
    options: dict[str, list[str]] = {}
    for item in argv[:split]:
        key, sep, value = item.partition("=")
        if not sep:
            raise Refused(f"bad option {item!r}")
        options.setdefault(key, []).append(value)
    command = argv[split + 1 :]
    if not command:
        raise Refused("no command")
    return options, command


def main(argv: list[str]) -> None:
    try:
        options, command = parse(argv)
        confine(options)
    except (Refused, OSError, ValueError) as exc:
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
