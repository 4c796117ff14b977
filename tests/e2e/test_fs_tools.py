"""The workspace tools end to end: a model fixes a failing test in a fixture repository,
the user approves each write, and `turn/undo` takes the change back (also after a
restart); refusals reach the model as tool errors and change nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from tests.e2e.conftest import StartJpd
from tests.e2e.harness import Jpd
from tests.e2e.test_turns import disk_events
from tests.e2e.tools import make_tool, tool_call, tool_toml

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


@pytest.fixture
def repo(home: Path) -> Path:
    """A git repository whose test fails: `add` subtracts."""
    root = home / "repo"
    root.mkdir()
    (root / "calc.py").write_text(BUGGY)
    (root / "test_calc.py").write_text(TEST)
    (root / ".gitignore").write_text("*.log\n__pycache__/\n")
    (root / "noise.log").write_text("return a - b\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    return root


def test_passes(root: Path) -> bool:
    """Whether the fixture's test passes (run as a plain script, not under pytest)."""
    check = "from calc import add; assert add(2, 3) == 5"
    return subprocess.run([sys.executable, "-c", check], cwd=root).returncode == 0


test_passes.__test__ = False  # type: ignore[attr-defined]


def of_kind(daemon: Jpd, turn_id: str, kind: str) -> list[dict[str, Any]]:
    return [e["event"] for e in daemon.turn_events(turn_id) if e["event"]["kind"] == kind]


async def allow(params: dict[str, Any]) -> Any:
    return {"allow": True}


FIX_SCRIPT = [
    tool_call("fs_list_files", "c1"),
    tool_call("fs_grep_files", "c2", pattern=r"a - b"),
    tool_call("fs_read_file", "c3", path="calc.py", start_line=1),
    tool_call("fs_modify_file", "c4", path="calc.py", old_text="a - b", new_text="a + b"),
    # The fixture's test, run by the model in the sandbox (writes only in the workspace).
    tool_call(
        "run_command",
        "c5",
        command=f"{sys.executable} -c 'from calc import add; assert add(2, 3) == 5' && echo ok",
    ),
    {"text": "Fixed: add now adds."},
]

# The test run as a local tool (run_command is another branch's): in the workspace.
RUN_TESTS = """
import subprocess
check = "from calc import add; assert add(2, 3) == 5"
done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
print("tests passed" if done.returncode == 0 else "tests failed: " + done.stderr[-200:])
"""


async def fix(
    jpd_factory: StartJpd, repo: Path, script: list[dict[str, Any]]
) -> tuple[Jpd, dict[str, Any]]:
    command = make_tool(repo.parent, "run_tests", RUN_TESTS)
    daemon = await jpd_factory(
        responses=script, config=tool_toml("run_tests", command, run='"unattended"')
    )
    await daemon.initialize(workspaceRoot=str(repo), capabilities={"permission": True})
    daemon.on_permission = allow
    started, events = await daemon.run_turn("the tests fail, fix the bug")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    return daemon, started


async def test_find_read_fix_and_undo(jpd_factory: StartJpd, repo: Path, home: Path) -> None:
    assert not test_passes(repo)
    daemon, started = await fix(jpd_factory, repo, [*FIX_SCRIPT, {"text": "noted"}])
    turn, conversation = started["turnId"], started["conversationId"]
    results = {r["id"]: r for r in of_kind(daemon, turn, "tool_result")}
    assert not any(r["isError"] for r in results.values()), results
    assert results["c1"]["content"].splitlines() == [".gitignore", "calc.py", "test_calc.py"]
    assert results["c2"]["content"] == "calc.py:2:     return a - b"
    assert results["c3"]["content"] == "     1\tdef add(a, b):\n     2\t    return a - b"
    assert "-    return a - b\n+    return a + b" in results["c4"]["content"]
    assert results["c5"]["content"].startswith("exit code: 0") and "ok" in results["c5"]["content"]
    assert (repo / "calc.py").read_text() == FIXED and test_passes(repo)
    # Only the write and the command asked for permission; the readers run unattended.
    assert [p["toolName"] for p in daemon.permissions] == ["fs_modify_file", "run_command"]

    calls = {c["id"]: c for c in of_kind(daemon, turn, "tool_call")}
    calc = str((repo / "calc.py").resolve())
    assert [calls[c]["toolKind"] for c in ("c1", "c2", "c3", "c4")] == [
        "search",
        "search",
        "read",
        "edit",
    ]
    assert calls["c3"]["locations"] == [{"path": calc, "line": 1}]
    # An edit: the line it starts on, and the whole file before and after.
    assert calls["c4"]["locations"] == [{"path": calc, "line": 2}]
    assert calls["c4"]["diff"] == {"path": calc, "oldText": BUGGY, "newText": FIXED}
    assert [calls[c]["title"] for c in ("c3", "c4")] == [
        "Read calc.py (from line 1)",
        "Edit calc.py",
    ]

    [change] = [e for e in disk_events(home, conversation) if e["type"] == "file_changed"]
    assert change["path"] == calc and change["turn_id"] == turn and change["tool_call_id"] == "c4"

    changes = await daemon.request("turn/changes", {"conversationId": conversation})
    assert changes == {
        "turnId": turn,
        "files": [{"path": calc, "before": BUGGY, "created": False}],
        "undone": False,
    }
    undone = await daemon.request("turn/undo", {"conversationId": conversation})
    assert undone == {"turnId": turn, "restored": [calc], "removed": []}
    changes = await daemon.request("turn/changes", {"conversationId": conversation, "turnId": turn})
    assert changes["undone"] is True
    assert (repo / "calc.py").read_text() == BUGGY
    assert disk_events(home, conversation)[-1]["type"] == "turn_undo"
    with pytest.raises(JsonRpcException) as again:
        await daemon.request("turn/undo", {"conversationId": conversation, "turnId": turn})
    assert again.value.code == -32602 and "undone already" in again.value.message
    # The model is told in the next turn that its edit is gone.
    await daemon.run_turn("what now?", conversationId=conversation)
    last = json.loads((home / "requests.jsonl").read_text().splitlines()[-1])
    notes = [m["content"] for m in last["messages"] if m["role"] == "user"]
    assert notes[-2].startswith(f"[The user undid the file changes of an earlier turn ({turn})")
    assert calc in notes[-2] and notes[-1] == "what now?"
    # The edit's result is in the rebuilt history (its file_changed event sits inside
    # the tool-call batch of the log).
    tools = {m["tool_call_id"]: m["content"] for m in last["messages"] if m["role"] == "tool"}
    assert tools["c4"].startswith("Modified calc.py")


async def test_undo_survives_a_restart_and_removes_created_files(
    jpd_factory: StartJpd, repo: Path
) -> None:
    script = [
        tool_call("fs_modify_file", "c1", path="calc.py", old_text="a - b", new_text="a + b"),
        tool_call("fs_create_file", "c2", path="tests/test_more.py", content="x = 1\n"),
        {"text": "done"},
    ]
    daemon, started = await fix(jpd_factory, repo, script)
    assert (repo / "tests" / "test_more.py").exists()
    await daemon.stop()
    again = await jpd_factory()
    await again.initialize(workspaceRoot=str(repo))
    undone = await again.request(
        "turn/undo", {"conversationId": started["conversationId"], "turnId": started["turnId"]}
    )
    # The folder made for the created file goes too.
    assert undone["removed"] == [
        str((repo / "tests" / "test_more.py").resolve()),
        str((repo / "tests").resolve()) + "/",
    ]
    assert (repo / "calc.py").read_text() == BUGGY
    assert not (repo / "tests" / "test_more.py").exists()


async def test_undo_refuses_a_file_changed_since(jpd_factory: StartJpd, repo: Path) -> None:
    daemon, started = await fix(jpd_factory, repo, FIX_SCRIPT)
    (repo / "calc.py").write_text(FIXED + "# my own edit\n")
    with pytest.raises(JsonRpcException) as refused:
        await daemon.request("turn/undo", {"conversationId": started["conversationId"]})
    assert refused.value.code == -32602
    assert str((repo / "calc.py").resolve()) in refused.value.message
    assert "changed since" in refused.value.message
    assert (repo / "calc.py").read_text() == FIXED + "# my own edit\n"
    with pytest.raises(JsonRpcException) as unknown:
        await daemon.request(
            "turn/undo", {"conversationId": started["conversationId"], "turnId": "t-nope"}
        )
    assert unknown.value.code == -32001


async def test_refusals_are_tool_errors_and_change_nothing(
    jpd_factory: StartJpd, repo: Path, home: Path
) -> None:
    (home / "secret.txt").write_text("password\n")
    (repo / "link.txt").symlink_to(home / "secret.txt")
    script = [
        tool_call("fs_read_file", "c1", path="../secret.txt"),
        tool_call("fs_read_file", "c2", path=str(home / "secret.txt")),
        tool_call("fs_read_file", "c3", path="link.txt"),
        tool_call("fs_modify_file", "c4", path="calc.py", old_text="nope", new_text="x"),
        tool_call("fs_create_file", "c5", path="calc.py", content="overwritten\n"),
        {"text": "gave up"},
    ]
    daemon = await jpd_factory(responses=script)
    capabilities = {"permission": True, "prompt": {"answerTypes": ["boolean"]}}
    await daemon.initialize(workspaceRoot=str(repo), capabilities=capabilities)
    daemon.on_permission = allow
    asked: list[dict[str, Any]] = []

    async def say_no(params: dict[str, Any]) -> Any:
        asked.append(params)
        return {"answer": False}

    daemon.on_prompt = say_no
    started, _ = await daemon.run_turn("try")
    results = {r["id"]: r for r in of_kind(daemon, started["turnId"], "tool_result")}
    assert all(r["isError"] for r in results.values())
    assert all("password" not in r["content"] for r in results.values())
    assert "`..`" in results["c1"]["content"]
    assert "absolute" in results["c2"]["content"]
    assert "symlink" in results["c3"]["content"]
    assert "not found" in results["c4"]["content"]
    assert "chose not to overwrite" in results["c5"]["content"]
    assert [a["question"]["id"] for a in asked] == ["overwrite"]
    assert (repo / "calc.py").read_text() == BUGGY


@pytest.mark.parametrize(
    ("mode", "asked", "edited", "ran"),
    [
        ("read-only", [], False, False),
        ("accept-edits", ["run_command"], True, True),
        ("auto", [], True, True),
    ],
)
async def test_permission_modes_decide_for_the_workspace_tools(
    jpd_factory: StartJpd, repo: Path, mode: str, asked: list[str], edited: bool, ran: bool
) -> None:
    """`read-only` refuses the edit and the command whatever the config says;
    `accept-edits` edits without asking and still asks for the command; `auto` asks
    nothing (the command still runs in the sandbox)."""
    daemon = await jpd_factory(responses=[*FIX_SCRIPT[3:5], {"text": "done"}])
    await daemon.initialize(workspaceRoot=str(repo), capabilities={"permission": True})
    daemon.on_permission = allow
    started, events = await daemon.run_turn("fix it", mode=mode)
    assert events[-1]["event"]["stopReason"] == "end_turn"
    results = {r["id"]: r for r in of_kind(daemon, started["turnId"], "tool_result")}
    assert [p["toolName"] for p in daemon.permissions] == asked
    assert ((repo / "calc.py").read_text() == FIXED) is edited
    assert results["c4"]["isError"] is not edited
    assert results["c5"]["isError"] is not ran
    if not ran:
        assert "read-only" in results["c5"]["content"]
