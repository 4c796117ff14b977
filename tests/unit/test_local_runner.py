"""Running local tools as real processes (`jpd.tools.local_runner`).

The tools are small Python scripts written into `tmp_path`. Tests that leave
processes behind on failure record their pids in a file, so the test can check
that the whole process group is gone when `run_local_tool` returns.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from jpd.config.tools import CommandConfig
from jpd.process_groups import ToolProcesses
from jpd.tools import local_runner
from jpd.tools.local_runner import run_local_tool
from jpd.tools.outcome import Failure, NeedsInput, Success, ToolOutcome

# A child that the tool starts and that keeps running (and holds stdout open).
SPAWN_SLEEPER = "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])"


def script(tmp_path: Path, body: str) -> CommandConfig:
    """A command running `body` as a Python script."""
    path = tmp_path / f"tool_{len(list(tmp_path.glob('tool_*.py')))}.py"
    path.write_text("import json, os, signal, subprocess, sys, time\n" + textwrap.dedent(body))
    return CommandConfig(program=sys.executable, args=[str(path)])


PROCESSES: ToolProcesses | None = None
"""Set by `launch_mode`: every test of `run` runs directly and under the launcher."""


@pytest.fixture(autouse=True, params=["direct", "launcher"])
def launch_mode(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[None]:
    global PROCESSES
    if request.param == "direct":
        yield
        return
    PROCESSES = ToolProcesses(tmp_path / "launcher-data")
    try:
        yield
    finally:
        PROCESSES.close()
        PROCESSES = None


async def run(command: str | CommandConfig, root: Path, **overrides: Any) -> ToolOutcome:
    fields: dict[str, Any] = {
        "processes": PROCESSES,
        "name": "t",
        "command": command,
        "arguments": {},
        "answers": {},
        "options": {},
        "root": root,
        "conversation_id": None,
        "timeout": 60.0,
    }
    fields.update(overrides)
    return await run_local_tool(**fields)


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie is dead: only its exit status is left)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat[stat.rfind(")") + 2] not in "ZX"


WRITE_PIDS = """
child = {spawn}
pids = f"{{os.getpid()}} {{child.pid}}"
with open("pids.tmp", "w") as f:
    f.write(pids)
os.replace("pids.tmp", "pids")
"""


def pid_writer(tmp_path: Path, after: str, spawn: str = SPAWN_SLEEPER) -> CommandConfig:
    """A tool that starts a child, writes both pids to `root/pids`, then runs `after`."""
    return script(tmp_path, WRITE_PIDS.format(spawn=spawn) + textwrap.dedent(after))


def read_pids(root: Path) -> list[int]:
    return [int(pid) for pid in (root / "pids").read_text().split()]


# --- the protocol --------------------------------------------------------------------


async def test_context_on_stdin_and_cwd(tmp_path: Path) -> None:
    command = script(
        tmp_path,
        """
        context = json.load(sys.stdin)
        content = json.dumps({"context": context, "cwd": os.getcwd()})
        print(json.dumps({"type": "success", "content": content}))
        """,
    )

    outcome = await run(
        command,
        tmp_path,
        name="echo",
        arguments={"path": "a.txt", "n": 2},
        answers={"confirm": True},
        options={"verbose": True},
        conversation_id="c-1",
    )

    assert isinstance(outcome, Success), outcome
    echoed = json.loads(outcome.content)
    assert echoed["context"] == {
        "tool": {
            "name": "echo",
            "arguments": {"path": "a.txt", "n": 2},
            "answers": {"confirm": True},
            "options": {"verbose": True},
        },
        "context": {"action": "run", "root": str(tmp_path), "conversation_id": "c-1"},
    }
    assert await anyio.Path(echoed["cwd"]).samefile(tmp_path)


async def test_needs_input_then_success_with_answers(tmp_path: Path) -> None:
    command = script(
        tmp_path,
        """
        answers = json.load(sys.stdin)["tool"]["answers"]
        if "confirm" not in answers:
            question = {"id": "confirm", "text": "Delete?", "answer_type": {"type": "boolean"}}
            print(json.dumps({"type": "needs_input", "question": question}))
        else:
            print(json.dumps({"type": "success", "content": f"confirm={answers['confirm']}"}))
        """,
    )

    first = await run(command, tmp_path)
    assert isinstance(first, NeedsInput), first
    assert first.question.id == "confirm"

    second = await run(command, tmp_path, answers={"confirm": False})
    assert second == Success(content="confirm=False")


async def test_plain_output_is_success(tmp_path: Path) -> None:
    command = f"{shlex.quote(sys.executable)} -c 'print(\"plain text\")'"

    assert await run(command, tmp_path) == Success(content="plain text\n")


async def test_tool_not_reading_stdin(tmp_path: Path) -> None:
    assert await run("true", tmp_path) == Success(content="")


async def test_shell_command(tmp_path: Path) -> None:
    command = CommandConfig(program="echo", args=["$((1 + 2))", "|", "tr", "3", "x"], shell=True)

    assert await run(command, tmp_path) == Success(content="x\n")


async def test_env_replaces_the_environment(tmp_path: Path) -> None:
    command = script(tmp_path, "print(os.environ.get('JPD_T'), os.environ.get('HOME'))")

    outcome = await run(command, tmp_path, env={"JPD_T": "set"})

    assert outcome == Success(content="set None\n")


async def test_error_outcome_and_exit_code(tmp_path: Path) -> None:
    command = script(
        tmp_path,
        """
        print(json.dumps({"type": "error", "message": "no such file", "transient": True}))
        sys.exit(1)
        """,
    )

    assert await run(command, tmp_path) == Failure(message="no such file", transient=True)


async def test_non_zero_exit_with_text(tmp_path: Path) -> None:
    command = script(tmp_path, "print('disk full'); sys.exit(3)")

    outcome = await run(command, tmp_path, name="writer")

    assert isinstance(outcome, Failure)
    assert "tool 'writer' exited with code 3" in outcome.message
    assert "disk full" in outcome.message


async def test_stderr_is_logged_at_debug_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    command = script(tmp_path, "print('token=s3cr3t', file=sys.stderr); print('ok')")
    caplog.set_level(logging.DEBUG, logger=local_runner.__name__)

    assert await run(command, tmp_path, name="leaky") == Success(content="ok\n")

    logged = [r for r in caplog.records if "token=s3cr3t" in r.getMessage()]
    assert logged and all(r.levelno == logging.DEBUG for r in logged)
    assert "leaky" in logged[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.INFO]


# --- failures the model sees ---------------------------------------------------------


async def test_crash_names_the_signal(tmp_path: Path) -> None:
    command = script(tmp_path, "print('partial', flush=True); os.abort()")

    outcome = await run(command, tmp_path, name="crasher")

    assert isinstance(outcome, Failure)
    assert "tool 'crasher' was killed by SIGABRT" in outcome.message


@pytest.mark.parametrize(
    ("printed", "problem"),
    [
        ('{"type": "success", "content": ', "printed invalid JSON"),
        ('{"type": "succes", "content": "x"}', "printed JSON that is not a valid outcome"),
    ],
)
async def test_garbage_json(tmp_path: Path, printed: str, problem: str) -> None:
    command = script(tmp_path, f"print({printed!r})")

    outcome = await run(command, tmp_path, name="garbage")

    assert isinstance(outcome, Failure)
    assert f"tool 'garbage' {problem}" in outcome.message


async def test_huge_output_is_truncated_with_notice(tmp_path: Path) -> None:
    # 8 MiB is far more than any pipe buffer: a runner that stops reading would hang.
    command = script(
        tmp_path,
        """
        chunk = "x" * 65536
        for _ in range(128):
            sys.stdout.write(chunk)
        sys.stdout.write("END")
        """,
    )

    outcome = await run(command, tmp_path, max_output=1000)

    assert isinstance(outcome, Success), outcome
    omitted = 128 * 65536 + 3 - 1000
    assert (
        outcome.content == "x" * 500 + f"\n[... {omitted} bytes left out ...]\n" + "x" * 497 + "END"
    )


async def test_truncated_output_of_failing_tool(tmp_path: Path) -> None:
    command = script(tmp_path, "print('y' * 5000); sys.exit(2)")

    outcome = await run(command, tmp_path, max_output=100)

    assert isinstance(outcome, Failure)
    assert "exited with code 2" in outcome.message
    assert "[... 4901 bytes left out ...]" in outcome.message


@pytest.mark.parametrize(
    "command",
    ["definitely-not-a-program-jpd", CommandConfig(program="definitely-not-a-program-jpd")],
)
async def test_missing_program(tmp_path: Path, command: str | CommandConfig) -> None:
    outcome = await run(command, tmp_path, name="ghost")

    assert outcome == Failure(
        message="tool 'ghost': command not found: definitely-not-a-program-jpd"
    )


async def test_missing_program_through_the_shell(tmp_path: Path) -> None:
    command = CommandConfig(program="definitely-not-a-program-jpd --flag", shell=True)

    outcome = await run(command, tmp_path, name="ghost")

    assert outcome == Failure(
        message="tool 'ghost': command not found: definitely-not-a-program-jpd"
    )


async def test_program_not_executable(tmp_path: Path) -> None:
    path = tmp_path / "tool.sh"
    path.write_text("#!/bin/sh\necho hi\n")
    path.chmod(0o644)

    outcome = await run(str(path), tmp_path, name="noexec")

    assert outcome == Failure(message=f"tool 'noexec': permission denied: {path}")


@pytest.mark.parametrize("command", ["", "   ", "echo 'unbalanced"])
async def test_invalid_command_line(tmp_path: Path, command: str) -> None:
    outcome = await run(command, tmp_path, name="bad")

    assert isinstance(outcome, Failure)
    assert outcome.message.startswith("tool 'bad': invalid command:")


async def test_missing_working_directory(tmp_path: Path) -> None:
    outcome = await run("true", tmp_path / "gone", name="t")

    assert isinstance(outcome, Failure)
    assert "working directory does not exist" in outcome.message


# --- no process left behind ----------------------------------------------------------


async def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    command = pid_writer(tmp_path, "time.sleep(600)")

    outcome = await run(command, tmp_path, name="sleepy", timeout=5.0)

    assert outcome == Failure(message="tool 'sleepy' timed out after 5s")
    pids = read_pids(tmp_path)
    assert len(pids) == 2
    assert not any(running(pid) for pid in pids)


async def test_timeout_escalates_to_sigkill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_runner, "KILL_GRACE", 0.2)
    stubborn = (
        "subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])"
    )
    command = pid_writer(
        tmp_path, "signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)", stubborn
    )

    outcome = await run(command, tmp_path, name="stubborn", timeout=5.0)

    assert isinstance(outcome, Failure) and "timed out" in outcome.message
    assert not any(running(pid) for pid in read_pids(tmp_path))


async def test_leftover_child_is_killed_when_the_tool_exits(tmp_path: Path) -> None:
    # The child inherits stdout: the runner must not wait for it to close the pipe.
    command = pid_writer(tmp_path, "print('done')")

    outcome = await run(command, tmp_path)

    assert outcome == Success(content="done\n")
    assert not any(running(pid) for pid in read_pids(tmp_path))


async def test_cancellation_kills_the_process_group(tmp_path: Path) -> None:
    command = pid_writer(tmp_path, "time.sleep(600)")
    finished = False

    async def call() -> None:
        nonlocal finished
        await run(command, tmp_path, timeout=None)
        finished = True  # Reached only if the cancellation was swallowed.

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call)
            # The pids file is written by another process: nothing to wait on but the file.
            while not (tmp_path / "pids").exists():  # noqa: ASYNC110
                await anyio.sleep(0.05)
            tasks.cancel_scope.cancel()

    assert not finished
    pids = read_pids(tmp_path)
    assert len(pids) == 2
    assert not any(running(pid) for pid in pids)


async def test_the_clients_umask_and_a_missing_program_under_it(tmp_path: Path) -> None:
    made = tmp_path / "made.txt"
    command = f"{shlex.quote(sys.executable)} -c \"open('{made}', 'w').write('x')\""
    outcome = await run(command, tmp_path, umask=0o027)
    assert not isinstance(outcome, Failure), outcome
    assert made.stat().st_mode & 0o777 == 0o640
    missing = await run("/nonexistent/prog", tmp_path, umask=0o022)
    assert isinstance(missing, Failure) and "command not found" in missing.message
