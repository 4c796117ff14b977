"""What a person sees of tool calls in `jp query`, in a real pseudo-terminal against the
shared daemon: an edit that cannot apply fails without a prompt, an edit's prompt shows
a numbered diff in context, a created file's content is shown once, a failed command
gets ✗ and its exit code, the changed files are listed after the turn, and
`jp turn diff` shows the turn's change."""

from __future__ import annotations

import io
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pexpect

from tests.e2e.sockets import Daemons, socket_env
from tests.e2e.test_jp_socket import finish, persisted
from tests.e2e.test_jp_undo import jp
from tests.e2e.tools import tool_call

ALLOW = r"\[y/n/Y/N\] "
CALC = "".join(f"# line {i}\n" for i in range(1, 11)) + "def add(a, b):\n    return a - b\n"


def spawn_in(env: dict[str, str], cwd: Path, *args: str) -> tuple[pexpect.spawn, io.StringIO]:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "jpcli", *args],
        cwd=str(cwd),
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=(24, 120),
    )
    transcript = io.StringIO()
    child.logfile_read = transcript
    return child, transcript


async def test_tool_calls_as_a_person_sees_them(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(
        tmp_path,
        [
            tool_call("fs_modify_file", "c1", path="calc.py", old_text="a * b", new_text="x"),
            tool_call("fs_modify_file", "c2", path="calc.py", old_text="a - b", new_text="a + b"),
            tool_call("fs_create_file", "c3", path="notes.md", content="first\nsecond\n"),
            tool_call("run_command", "c4", command="echo failing >&2; exit 3"),
            {"text": "All done."},
        ],
    )
    env.update(TERM="xterm-256color", NO_COLOR="1")
    daemons.watch(env)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text(CALC)

    child, transcript = spawn_in(env, ws, "query", "fix it")
    # The first edit cannot apply: it fails at once, nobody is asked.
    child.expect(r"✗ Edit calc.py \d+\.\ds: old_text not found")
    # The second is asked with the change in context, numbered as in the file.
    child.expect(ALLOW)
    prompt = child.before
    assert "the assistant wants to: Edit calc.py" in prompt
    assert "   10 │  # line 10" in prompt and "    9 │  # line 9" in prompt
    assert "   12 │ -    return a - b" in prompt and "   12 │ +    return a + b" in prompt
    assert "# line 8" not in prompt  # three lines of context, not the whole file
    child.sendline("y")
    child.expect(r"✓ Edited calc.py \(\+1 -1\) \d+\.\ds")
    child.expect(ALLOW)
    created = child.before
    assert "the assistant wants to: Write notes.md" in created
    assert created.count("second") == 1  # the content once, not also as `content:`
    child.sendline("y")
    child.expect(r"✓ Wrote notes.md \(new, 2 lines\)")
    child.expect(ALLOW)
    assert "echo failing >&2; exit 3" in child.before
    child.sendline("y")
    child.expect(r"✗ Ran echo failing >&2; exit 3: exit 3 \d+\.\ds")
    child.expect("All done.")
    child.expect(r"Changed: calc.py, notes.md \(new\)")
    assert finish(child) == 0
    assert "  failing" in transcript.getvalue()  # the failed command's output under it

    shown = jp(env, ws, "turn", "diff")
    assert shown.returncode == 0, shown.stderr
    assert "--- a/calc.py" in shown.stdout and "+++ b/calc.py" in shown.stdout
    assert "-    return a - b\n+    return a + b" in shown.stdout
    assert "--- /dev/null\n+++ b/notes.md" in shown.stdout
    assert re.search(r"^\+second$", shown.stdout, re.MULTILINE)


async def test_a_refusal_says_why_and_decisions_are_in_the_log(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(
        tmp_path,
        [
            tool_call("run_command", "c1", command="rm -rf build"),
            tool_call("run_command", "c2", command="true"),
            {"text": "Understood."},
        ],
    )
    env.update(TERM="xterm-256color", NO_COLOR="1")
    daemons.watch(env)
    ws = tmp_path / "ws"
    ws.mkdir()
    child, _ = spawn_in(env, ws, "query", "clean up")
    child.expect(ALLOW)
    child.sendline("n")
    child.expect(r"Why not\? .*\) ")
    child.sendline("keep the build, it is slow to redo")
    child.expect(r"✗ rm -rf build \d+\.\ds: This tool call \(run_command\) was denied by the user")
    child.expect(ALLOW)
    child.sendline("y")
    child.expect(r"✓ Ran true: exit 0")
    child.expect("Understood.")
    assert finish(child) == 0

    [conversation] = (Path(env["JP_DATA_DIR"]) / "conversations").iterdir()
    events = persisted(env, conversation.name)
    [refused, _] = [e for e in events if e["type"] == "tool_call_response"]
    # The model reads the person's reason.
    assert "the user, who said: keep the build, it is slow to redo" in refused["content"]
    decisions = [
        (e["tool_call_id"], e["kind"], e["allowed"])
        for e in events
        if e["type"] == "permission_decision"
    ]
    assert decisions == [("c1", "run", False), ("c2", "run", True)]
    shown = jp(env, ws, "conversation", "show", conversation.name)
    assert "permission (run) for run_command: refused by the user, who said:" in shown.stdout


async def test_undo_takes_the_latest_turn_that_changed_files_and_its_folders(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(
        tmp_path,
        [
            tool_call("fs_create_file", "c1", path="pkg/sub/new.py", content="x = 1\n"),
            {"text": "Created."},
            {"text": "Just talking."},
        ],
    )
    config = Path(env["JP_CONFIG"])
    config.write_text(
        config.read_text() + '[conversation.tools.fs_create_file]\nrun = "unattended"\n'
    )
    daemons.watch(env)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pkg").mkdir()  # existed before: stays
    assert jp(env, ws, "query", "create it").returncode == 0
    assert (ws / "pkg" / "sub" / "new.py").exists()
    assert jp(env, ws, "query", "and now?").returncode == 0  # a turn without edits

    undone = jp(env, ws, "turn", "undo")
    assert undone.returncode == 0, undone.stderr
    assert f"removed  {(ws / 'pkg' / 'sub').resolve()}/" in undone.stdout
    assert not (ws / "pkg" / "sub").exists() and (ws / "pkg").is_dir()


def jp_with_umask(
    env: dict[str, str], cwd: Path, umask: int, *args: str
) -> subprocess.CompletedProcess[str]:
    """`jp` run in `cwd` from a shell whose umask is `umask`."""
    return subprocess.run(
        [sys.executable, "-m", "jpcli", *args],
        cwd=cwd,
        env=env,
        input="",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=lambda: os.umask(umask),
    )


async def test_tools_create_with_the_users_umask(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(
        tmp_path,
        [
            tool_call("fs_create_file", "c1", path="made/here/new.txt", content="x\n"),
            tool_call("run_command", "c2", command="mkdir -p out && touch out/ran.txt"),
            {"text": "Done."},
        ],
    )
    config = Path(env["JP_CONFIG"])
    config.write_text(
        config.read_text()
        + '[conversation.tools.fs_create_file]\nrun = "unattended"\n'
        + '[conversation.tools.run_command]\nrun = "unattended"\n'
    )
    daemons.watch(env)
    ws = tmp_path / "ws"
    ws.mkdir()
    done = jp_with_umask(env, ws, 0o027, "query", "make files")
    assert done.returncode == 0, done.stderr

    def mode(path: Path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    assert mode(ws / "made" / "here" / "new.txt") == 0o640
    assert mode(ws / "made") == mode(ws / "made" / "here") == 0o750
    assert mode(ws / "out") == 0o750 and mode(ws / "out" / "ran.txt") == 0o640


def git_repo(ws: Path) -> None:
    """`ws` as a git working tree with one commit (its own config only)."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(ws),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
    }
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"],
    ):
        subprocess.run(["git", *args], cwd=ws, env=env, check=True, capture_output=True)


def git_status(ws: Path) -> list[str]:
    done = subprocess.run(
        ["git", "status", "--porcelain"], cwd=ws, capture_output=True, text=True, check=True
    )
    return done.stdout.splitlines()


async def test_undo_covers_what_commands_changed(tmp_path: Path, daemons: Daemons) -> None:
    command = "echo changed > kept.txt && rm gone.txt && mkdir -p build && echo x > build/out.o"
    env = socket_env(
        tmp_path,
        [tool_call("run_command", "c1", command=command), {"text": "Ran it."}],
    )
    config = Path(env["JP_CONFIG"])
    config.write_text(config.read_text() + '[conversation.tools.run_command]\nrun = "unattended"\n')
    daemons.watch(env)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "kept.txt").write_text("original\n")
    (ws / "gone.txt").write_text("to be deleted\n")
    (ws / "scratch.log").write_text("untracked, ignored\n")
    (ws / ".gitignore").write_text("*.log\n")
    git_repo(ws)
    (ws / "notes.md").write_text("untracked\n")  # not committed: still the user's

    done = jp(env, ws, "query", "run it")
    assert done.returncode == 0, done.stderr
    assert "Changed: build/out.o (new), gone.txt, kept.txt" in done.stderr
    shown = jp(env, ws, "turn", "diff")
    assert "-original\n+changed" in shown.stdout and "+++ /dev/null" in shown.stdout

    undone = jp(env, ws, "turn", "undo")
    assert undone.returncode == 0, undone.stderr
    assert (ws / "kept.txt").read_text() == "original\n"
    assert (ws / "gone.txt").read_text() == "to be deleted\n"
    assert not (ws / "build" / "out.o").exists()
    assert (ws / "notes.md").exists() and (ws / "scratch.log").exists()
    # No ref, index entry or config of the repository changed.
    assert git_status(ws) == ["?? notes.md"]


async def test_a_cancelled_call_gets_its_line(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path, [tool_call("run_command", "c1", command="sleep 30")])
    config = Path(env["JP_CONFIG"])
    config.write_text(config.read_text() + '[conversation.tools.run_command]\nrun = "unattended"\n')
    env.update(TERM="xterm-256color", NO_COLOR="1")
    daemons.watch(env)
    ws = tmp_path / "ws"
    ws.mkdir()
    child, transcript = spawn_in(env, ws, "query", "wait")
    child.expect("⚙ sleep 30")
    child.sendintr()
    child.expect(r"\[c\]ancel")
    child.sendline("c")
    child.expect(r"✗ (Ran )?sleep 30[^\r\n]*")
    line = child.after
    assert finish(child) == 130
    assert "cancel" in line.lower(), line
    assert "✓" not in transcript.getvalue()
