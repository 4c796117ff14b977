"""Tools end to end: local tool scripts, parallel calls, questions, permissions, toggles."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from tests.e2e.conftest import StartJpd
from tests.e2e.harness import Jpd
from tests.e2e.test_turns import disk_events
from tests.e2e.tools import SHIP_IT, make_tool, tool_toml
from tests.e2e.tools import tool_call as call


def results(daemon: Jpd, turn_id: str) -> list[dict[str, Any]]:
    return [e["event"] for e in daemon.turn_events(turn_id) if e["event"]["kind"] == "tool_result"]


ECHO = """
content = "echo:" + args.get("text", "") + ":" + os.getcwd()
print(json.dumps({"type": "success", "content": content}))
"""


async def test_local_tool_runs_and_result_goes_back_to_model(
    jpd_factory: StartJpd, home: Path
) -> None:
    command = make_tool(home, "echo", ECHO)
    daemon = await jpd_factory(
        responses=[call("echo", text="hi"), {"text": "done"}],
        config=tool_toml("echo", command, run='"unattended"')
        + 'parameters.text = { type = "string", required = true }\n',
    )
    await daemon.initialize(workspaceRoot=str(home))
    started, events = await daemon.run_turn("echo please")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    [result] = results(daemon, started["turnId"])
    assert result == {
        "kind": "tool_result",
        "id": "call_1",
        "content": f"echo:hi:{home}",
        "isError": False,
        "hidden": False,
    }
    requests = [json.loads(x) for x in (home / "requests.jsonl").read_text().splitlines()]
    assert [t["name"] for t in requests[0]["tools"]] == [
        "ask_user",
        "describe_tools",
        "echo",
        "fs_create_file",
        "fs_grep_files",
        "fs_list_files",
        "fs_modify_file",
        "fs_read_file",
        "run_command",
        "update_plan",
        "answer_inquiry",
    ]
    assert requests[0]["tools"][2]["parameters"]["required"] == ["text"]
    assert requests[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": f"echo:hi:{home}",
        "is_error": False,
    }


async def test_parallel_calls_overlap_and_each_result_comes_when_its_call_ends(
    jpd_factory: StartJpd, home: Path
) -> None:
    # Each tool records its start, then waits (up to 20 s) until both have started:
    # run one after the other, the first would time out and report "alone".
    body = f"""
log = {str(home / "starts.log")!r}
with open(log, "a") as f:
    f.write(args["name"] + "\\n")
for _ in range(400):
    if len(open(log).read().split()) >= 2:
        print("together:" + args["name"])
        break
    time.sleep(0.05)
else:
    print("alone:" + args["name"])
"""
    command = make_tool(home, "meet", body)
    daemon = await jpd_factory(
        responses=[
            {
                "tool_calls": [
                    {"id": "a", "name": "meet", "arguments": {"name": "A"}},
                    {"id": "b", "name": "meet", "arguments": {"name": "B"}},
                ]
            },
            {"text": "ok"},
        ],
        config=tool_toml("meet", command, run='"unattended"')
        + 'parameters.name = { type = "string", required = true }\n',
    )
    await daemon.initialize()
    started, _ = await daemon.run_turn("meet")
    got = results(daemon, started["turnId"])
    # Both ran at once; each result is sent when its call ends (either may be first).
    assert sorted((r["id"], r["content"].strip()) for r in got) == [
        ("a", "together:A"),
        ("b", "together:B"),
    ]
    types = [e["type"] for e in disk_events(home, started["conversationId"])]
    assert types[2:6] == [
        "tool_call_request",
        "tool_call_request",
        "tool_call_response",
        "tool_call_response",
    ]


ASKS = """
if "confirm" not in answers:
    print(json.dumps({"type": "needs_input", "question": {"id": "confirm",
        "text": "Really?", "answer_type": {"type": "boolean"}}}))
else:
    print("confirmed=" + json.dumps(answers["confirm"]))
"""


async def test_needs_input_answered_by_static_config(jpd_factory: StartJpd, home: Path) -> None:
    command = make_tool(home, "asks", ASKS)
    daemon = await jpd_factory(
        responses=[call("asks"), {"text": "ok"}],
        config=tool_toml("asks", command, run='"unattended"') + "questions.confirm.answer = true\n",
    )
    await daemon.initialize()
    started, _ = await daemon.run_turn("go")
    assert results(daemon, started["turnId"])[0]["content"].strip() == "confirmed=true"
    persisted = disk_events(home, started["conversationId"])
    request = next(e for e in persisted if e["type"] == "inquiry_request")
    response = next(e for e in persisted if e["type"] == "inquiry_response")
    assert request["id"] == response["id"] == "call_1.confirm.1"
    assert request["source"] == {"type": "tool", "name": "asks"}
    assert request["question"]["answer_type"] == {"type": "boolean"}
    assert response["outcome"] == "answered" and response["answer"] is True


async def test_needs_input_answered_by_prompting_client(jpd_factory: StartJpd, home: Path) -> None:
    command = make_tool(home, "asks", ASKS)
    daemon = await jpd_factory(
        responses=[call("asks"), {"text": "ok"}],
        config=tool_toml("asks", command, run='"unattended"')
        + 'questions.confirm.prompt_label = "Deploy"\n',
    )
    await daemon.initialize(capabilities={"prompt": {"answerTypes": ["boolean"]}})

    async def answer(params: dict[str, Any]) -> Any:
        return {"answer": False}

    daemon.on_prompt = answer
    started, _ = await daemon.run_turn("go")
    assert results(daemon, started["turnId"])[0]["content"].strip() == "confirmed=false"
    [prompt] = daemon.prompts
    assert prompt["inquiryId"] == "call_1.confirm.1"
    assert prompt["promptLabel"] == "Deploy" and prompt["toolName"] == "asks"
    assert prompt["question"]["answerType"] == {"type": "boolean"}
    assert prompt["source"] == {"type": "tool", "name": "asks"}
    assert daemon.resolved[0]["inquiryId"] == "call_1.confirm.1"


async def test_permission_allow_deny_and_remember(jpd_factory: StartJpd, home: Path) -> None:
    command = make_tool(home, "echo", ECHO)
    daemon = await jpd_factory(
        responses=[
            call("echo", "c1", text="one"),
            call("echo", "c2", text="two"),
            {"text": "first turn done"},
            call("echo", "c3", text="three"),
            call("echo", "c4", text="four"),
            {"text": "second turn done"},
        ],
        config=tool_toml("echo", command, run='"ask"') + 'parameters.text = { type = "string" }\n',
    )
    await daemon.initialize(capabilities={"permission": True})
    answers = iter([{"allow": True}, {"allow": False}, {"allow": True, "remember": True}])

    async def permit(params: dict[str, Any]) -> Any:
        return next(answers)

    daemon.on_permission = permit
    first, _ = await daemon.run_turn("go")
    got = results(daemon, first["turnId"])
    assert got[0]["content"].startswith("echo:one") and not got[0]["isError"]
    assert got[1]["isError"] and "denied" in got[1]["content"]
    assert daemon.permissions[0]["kind"] == "run" and daemon.permissions[0]["toolName"] == "echo"
    second, _ = await daemon.run_turn("again", conversationId=first["conversationId"])
    got = results(daemon, second["turnId"])
    assert [r["isError"] for r in got] == [False, False]
    assert len(daemon.permissions) == 3  # the third answer was remembered for the turn


async def test_permission_with_no_capable_client_follows_detached_policy(
    jpd_factory: StartJpd, home: Path
) -> None:
    command = make_tool(home, "echo", ECHO)
    daemon = await jpd_factory(
        responses=[call("echo", "c1", text="x"), {"text": "a"}, call("echo", "c2"), {"text": "b"}],
        config=tool_toml("echo", command, run='"ask"') + 'parameters.text = { type = "string" }\n',
    )
    await daemon.initialize()
    started, _ = await daemon.run_turn("go", detached="deny")
    assert "denied" in results(daemon, started["turnId"])[0]["content"]
    started, _ = await daemon.run_turn("go", detached="auto")
    assert not results(daemon, started["turnId"])[0]["isError"]


@pytest.mark.parametrize(
    ("body", "timeout", "expected"),
    [
        ("sys.exit(3)", None, "exit"),
        ("print('{not json')\nsys.exit(2)", None, "invalid JSON"),
        ("print(json.dumps({'type': 'mystery'}))", None, "mystery"),
        ("time.sleep(30)", "0.5", "timed out"),
        ("os.kill(os.getpid(), 9)", None, "SIGKILL"),
    ],
)
async def test_tool_failures_are_error_responses_and_turn_goes_on(
    jpd_factory: StartJpd, home: Path, body: str, timeout: str | None, expected: str
) -> None:
    command = make_tool(home, "bad", body)
    settings = {"run": '"unattended"'}
    if timeout:
        settings["timeout"] = timeout
    daemon = await jpd_factory(
        responses=[call("bad"), {"text": "recovered"}],
        config=tool_toml("bad", command, **settings),
    )
    await daemon.initialize()
    started, events = await daemon.run_turn("go")
    [result] = results(daemon, started["turnId"])
    assert result["isError"] and expected in result["content"], result
    assert events[-1]["event"]["stopReason"] == "end_turn"


async def test_missing_program_unknown_tool_and_bad_arguments(
    jpd_factory: StartJpd, home: Path
) -> None:
    daemon = await jpd_factory(
        responses=[
            {
                "tool_calls": [
                    {"id": "m", "name": "ghost", "arguments": {}},
                    {"id": "u", "name": "nope", "arguments": {}},
                    {"id": "a", "name": "typed", "arguments": {"n": "three", "extra": 1}},
                ]
            },
            {"text": "ok"},
        ],
        config=tool_toml("ghost", "/nonexistent/program --flag", run='"unattended"')
        + tool_toml("typed", "/bin/true", run='"unattended"')
        + 'parameters.n = { type = "integer", required = true }\n',
    )
    await daemon.initialize()
    started, _ = await daemon.run_turn("go")
    # Results come as each call ends: find them by id.
    by_id = {r["id"]: r for r in results(daemon, started["turnId"])}
    ghost, nope, typed = by_id["m"], by_id["u"], by_id["a"]
    assert ghost["isError"] and "not found" in ghost["content"]
    assert nope["isError"] and "does not exist" in nope["content"]
    assert typed["isError"] and "n" in typed["content"] and "extra" in typed["content"]


async def test_cancel_kills_running_tool_process_group(jpd_factory: StartJpd, home: Path) -> None:
    pids = home / "pids.txt"
    body = f"""
import subprocess
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open({str(pids)!r}, "w").write(f"{{os.getpid()}} {{child.pid}}")
time.sleep(60)
"""
    command = make_tool(home, "sleepy", body)
    daemon = await jpd_factory(
        responses=[call("sleepy"), {"text": "never"}],
        config=tool_toml("sleepy", command, run='"unattended"'),
    )
    await daemon.initialize()
    started = await daemon.request("turn/start", {"message": "sleep"})
    for _ in range(400):
        if pids.exists() and len(pids.read_text().split()) == 2:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the tool never started its child process")
    await daemon.request("turn/cancel", {"turnId": started["turnId"]})
    done = await daemon.wait_event(started["turnId"], "turn_completed", timeout=20)
    assert done["event"]["stopReason"] == "cancelled"
    started_pids = [int(pid) for pid in pids.read_text().split()]
    assert len(started_pids) == 2 and all(pid > 0 for pid in started_pids)
    for pid in started_pids:
        for _ in range(100):
            if not _alive(pid):
                break
            await asyncio.sleep(0.05)
        assert not _alive(pid), f"process {pid} survived the cancel"
    persisted = disk_events(home, started["conversationId"])
    response = next(e for e in persisted if e["type"] == "tool_call_response")
    assert response["is_error"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


async def test_toggles_honour_allow_toggle(jpd_factory: StartJpd, home: Path) -> None:
    daemon = await jpd_factory(
        responses=[{"text": "x"}] * 3,
        config=tool_toml("keep", "/bin/true", enable='"always"')
        + tool_toml("shy", "/bin/true", enable='"explicit"')
        + tool_toml("plain", "/bin/true"),
    )
    await daemon.initialize()
    await daemon.run_turn("1", tools=[{"enable": False}])
    await daemon.run_turn("2", tools=[{"enable": False}, {"enable": True, "name": "shy"}])
    with pytest.raises(JsonRpcException) as info:
        await daemon.request(
            "turn/start", {"message": "3", "tools": [{"enable": False, "name": "keep"}]}
        )
    assert info.value.code == -32602 and "never" in info.value.message
    requests = [json.loads(x) for x in (home / "requests.jsonl").read_text().splitlines()]
    # ask_user is `if_named`: a bulk disable leaves it on.
    assert [t["name"] for t in requests[0]["tools"]] == ["ask_user", "keep", "answer_inquiry"]
    assert [t["name"] for t in requests[1]["tools"]] == [
        "ask_user",
        "keep",
        "shy",
        "answer_inquiry",
    ]


async def test_tool_list_and_tool_call(jpd_factory: StartJpd, home: Path) -> None:
    command = make_tool(home, "echo", ECHO)
    daemon = await jpd_factory(
        config=tool_toml("echo", command, run='"unattended"')
        + 'parameters.text = { type = "string" }\n'
    )
    await daemon.initialize(workspaceRoot=str(home))
    listed = (await daemon.request("tool/list", {}))["tools"]
    assert [t["name"] for t in listed][:3] == ["ask_user", "describe_tools", "echo"]
    echo = listed[2]
    assert echo["source"] == "local" and echo["enabled"] and echo["run"] == "unattended"
    result = await daemon.request("tool/call", {"name": "echo", "arguments": {"text": "yo"}})
    assert result == {"content": f"echo:yo:{home}", "isError": False}
    described = await daemon.request(
        "tool/call", {"name": "describe_tools", "arguments": {"tools": ["echo"]}}
    )
    assert described["content"].startswith("## echo")
    bad = await daemon.request("tool/call", {"name": "missing", "arguments": {}})
    assert bad["isError"]


async def test_tool_call_in_a_conversation_with_a_running_turn_is_busy(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 5.15: `tool/call` with the `conversationId` of a conversation whose turn
    is running is refused with -32005 (its records would land inside the turn's); once the
    turn has ended the same call runs and is recorded."""
    command = make_tool(home, "asker", SHIP_IT)
    daemon = await jpd_factory(
        responses=[call("asker"), {"text": "done"}],
        config=tool_toml("asker", command, run='"unattended"'),
    )
    await daemon.initialize(capabilities={"prompt": {"answerTypes": ["boolean"]}})
    asked, release = asyncio.Event(), asyncio.Event()

    async def slow(params: dict[str, Any]) -> Any:
        asked.set()
        await release.wait()
        return {"answer": True}

    daemon.on_prompt = slow
    started = await daemon.request("turn/start", {"message": "go"})
    conversation = started["conversationId"]
    await asyncio.wait_for(asked.wait(), 60)

    with pytest.raises(JsonRpcException) as refused:
        await daemon.request(
            "tool/call", {"name": "describe_tools", "conversationId": conversation}
        )
    assert refused.value.code == -32005

    release.set()
    await daemon.wait_event(started["turnId"], "turn_completed")
    ran = await daemon.request(
        "tool/call",
        {
            "name": "describe_tools",
            "arguments": {"tools": ["asker"]},
            "conversationId": conversation,
        },
    )
    assert not ran["isError"]
    kinds = [e["type"] for e in disk_events(home, conversation)]
    assert kinds[-3:] == ["turn_end", "tool_call_request", "tool_call_response"]
