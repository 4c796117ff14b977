"""MCP servers as tool sources, end to end: the real `jpd`, the scripted model, and real
MCP servers (tests/fixtures/mcp_server.py) over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import StartJpd
from tests.e2e.harness import Jpd
from tests.e2e.test_turns import disk_events
from tests.e2e.tools import tool_call as call

SERVER = Path(__file__).parent.parent / "fixtures" / "mcp_server.py"


def results(daemon: Jpd, turn_id: str) -> list[dict[str, Any]]:
    """The turn's tool results in the order the model called them.

    Tools run concurrently, so their results arrive in completion order.
    """
    events = [e["event"] for e in daemon.turn_events(turn_id)]
    calls = [e["id"] for e in events if e["kind"] == "tool_call"]
    found = [e for e in events if e["kind"] == "tool_result"]
    return sorted(found, key=lambda e: calls.index(e["id"]) if e["id"] in calls else len(calls))


def stdio_toml(name: str = "fx", env: dict[str, str] | None = None, **extra: str) -> str:
    """`[mcp.servers.<name>]` running the fixture server on stdio."""
    lines = [f"[mcp.servers.{name}]", f"command = {json.dumps([sys.executable, str(SERVER)])}"]
    if env:
        lines.append(
            "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }"
        )
    lines += [f"{key} = {value}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


def unattended(*names: str) -> str:
    return "".join(f'[conversation.tools.{n}]\nrun = "unattended"\n' for n in names)


def requests(home: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (home / "requests.jsonl").read_text().splitlines()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def http_server() -> Iterator[str]:
    """The fixture server on streamable HTTP at 127.0.0.1:<free port>; yields its URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                import time

                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


async def test_stdio_tool_call_through_a_turn(jpd_factory: StartJpd, home: Path) -> None:
    daemon = await jpd_factory(
        responses=[call("echo", text="hi"), {"text": "done"}],
        config=stdio_toml(env={"NOTE": "from-config"}) + unattended("echo"),
    )
    await daemon.initialize(workspaceRoot=str(home))
    started, events = await daemon.run_turn("echo please")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    [result] = results(daemon, started["turnId"])
    assert result["content"] == "echo:hi:from-config"
    assert result["isError"] is False
    offered = {t["name"]: t for t in requests(home)[0]["tools"]}
    # Every tool of the server, under its own name, with the server's input schema.
    assert {"add", "echo", "deploy", "slow", "crash"} <= set(offered)
    assert offered["add"]["parameters"]["required"] == ["a", "b"]
    assert offered["add"]["description"] == "Add two integers."
    stored = disk_events(home, started["conversationId"])
    response = next(e for e in stored if e["type"] == "tool_call_response")
    assert response["content"] == "echo:hi:from-config"
    # tool/call runs it too, outside a turn, on the same (still running) server.
    direct = await daemon.request("tool/call", {"name": "echo", "arguments": {"text": "x"}})
    assert direct == {"content": "echo:x:from-config", "isError": False}


async def test_a_stdio_server_gets_the_tool_allow_list_and_its_env(
    jpd_factory: StartJpd, home: Path
) -> None:
    """An MCP server's environment is the tools' allow-list plus its config's `env`:
    a secret-looking or any other variable of the daemon's does not reach it."""
    names = ["LANG", "DATABASE_URL", "AWS_PROFILE", "SSH_AUTH_SOCK", "NOTE"]
    daemon = await jpd_factory(
        responses=[*(call("getenv", variable=n) for n in names), {"text": "done"}],
        config=stdio_toml(env={"NOTE": "from-config"}) + unattended("getenv"),
        env={
            "LANG": "C.UTF-8",
            "DATABASE_URL": "postgres://u:pw@db/x",
            "AWS_PROFILE": "prod",
            "SSH_AUTH_SOCK": "/tmp/agent.sock",
        },
    )
    await daemon.initialize(workspaceRoot=str(home))
    started, _ = await daemon.run_turn("env please")
    seen = [r["content"] for r in results(daemon, started["turnId"])]
    assert seen == ["C.UTF-8", "<unset>", "<unset>", "<unset>", "from-config"]


async def test_http_tool_call_and_tool_list(
    jpd_factory: StartJpd, home: Path, http_server: str
) -> None:
    config = (
        f'[mcp.servers.web]\nurl = "{http_server}"\nheaders = {{ X-Test = "1" }}\n'
        '[conversation.tools.plus]\nsource = "mcp.web.add"\nrun = "unattended"\n'
    )
    daemon = await jpd_factory(responses=[call("plus", a=2, b=40), {"text": "done"}], config=config)
    await daemon.initialize(workspaceRoot=str(home))
    listed = {t["name"]: t for t in (await daemon.request("tool/list"))["tools"]}
    assert listed["plus"]["source"] == "mcp"
    assert listed["plus"]["server"] == "web"
    assert listed["plus"]["mcpTool"] == "add"
    assert "add" not in listed  # renamed, not offered twice
    assert listed["echo"]["server"] == "web"
    started, _ = await daemon.run_turn("add")
    [result] = results(daemon, started["turnId"])
    assert result["content"] == "42"


async def test_content_kinds_structured_and_is_error(jpd_factory: StartJpd, home: Path) -> None:
    daemon = await jpd_factory(
        responses=[
            {
                "tool_calls": [
                    {"id": "c1", "name": "picture", "arguments": {}},
                    {"id": "c2", "name": "weather", "arguments": {"city": "Oslo"}},
                    {"id": "c3", "name": "broken", "arguments": {}},
                ]
            },
            {"text": "done"},
        ],
        config=stdio_toml() + unattended("picture", "weather", "broken"),
    )
    await daemon.initialize(workspaceRoot=str(home))
    started, _ = await daemon.run_turn("go")
    picture, weather, broken = results(daemon, started["turnId"])
    assert picture["content"] == (
        "a picture:\n[image: image/png, 8 bytes]\n[resource file:///notes/a.txt]\nnote A"
    )
    assert json.loads(weather["content"]) == {"city": "Oslo", "celsius": 21}
    # The image itself reaches the model beside the text, and the log.
    [sent] = [m for m in requests(home)[1]["messages"] if m.get("tool_call_id") == "c1"]
    assert sent["images"] == [{"mime_type": "image/png", "data": "iVBORw0KGgo="}]
    stored = disk_events(home, started["conversationId"])
    [picture_event] = [
        e for e in stored if e.get("id") == "c1" and e["type"] == "tool_call_response"
    ]
    assert picture_event["images"] == sent["images"]
    assert broken["isError"] is True
    assert "broken" in broken["content"]


async def test_two_tools_with_one_name_is_a_config_error(jpd_factory: StartJpd, home: Path) -> None:
    daemon = await jpd_factory(config=stdio_toml("one") + stdio_toml("two"))
    await daemon.initialize(workspaceRoot=str(home))
    with pytest.raises(Exception) as caught:
        await daemon.request("turn/start", {"message": "x"})
    text = str(caught.value)
    assert "two tools are named 'add'" in text
    assert "mcp.one.add" in text and "mcp.two.add" in text


async def test_crashing_server_is_a_tool_error_and_restarts(
    jpd_factory: StartJpd, home: Path
) -> None:
    daemon = await jpd_factory(
        responses=[call("crash"), {"text": "x"}, call("echo", text="again"), {"text": "ok"}],
        config=stdio_toml() + unattended("crash", "echo"),
    )
    await daemon.initialize(workspaceRoot=str(home))
    started, _ = await daemon.run_turn("crash")
    [result] = results(daemon, started["turnId"])
    assert result["isError"] is True
    assert "MCP server 'fx'" in result["content"]
    assert "fixture: about to crash" in result["content"]  # the stderr tail
    second, _ = await daemon.run_turn("again", conversationId=started["conversationId"])
    [result] = results(daemon, second["turnId"])
    assert result == {**result, "content": "echo:again:", "isError": False}


async def test_server_that_fails_to_start_names_itself(jpd_factory: StartJpd, home: Path) -> None:
    script = home / "bad_server.py"
    script.write_text("import sys\nprint('no such module: notes', file=sys.stderr)\nsys.exit(2)\n")
    config = (
        f"[mcp.servers.bad]\ncommand = {json.dumps([sys.executable, str(script)])}\n"
        '[conversation.tools.note]\nsource = "mcp.bad.note"\nrun = "unattended"\n'
    )
    daemon = await jpd_factory(responses=[call("note"), {"text": "done"}], config=config)
    await daemon.initialize(workspaceRoot=str(home))
    started, events = await daemon.run_turn("note")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    [result] = results(daemon, started["turnId"])
    assert result["isError"] is True
    assert "MCP server 'bad'" in result["content"]
    assert "no such module: notes" in result["content"]


async def test_cancel_reaches_the_server_and_progress_is_an_event(
    jpd_factory: StartJpd, home: Path
) -> None:
    log = home / "server.log"
    daemon = await jpd_factory(
        responses=[call("slow", seconds=60), {"text": "never"}],
        config=stdio_toml(env={"MCP_FIXTURE_LOG": str(log)}) + unattended("slow"),
    )
    await daemon.initialize(workspaceRoot=str(home))
    started = await daemon.request("turn/start", {"message": "slow"})
    progress = await daemon.wait_event(started["turnId"], "tool_progress")
    assert progress["event"] == {
        "kind": "tool_progress",
        "id": "call_1",
        "progress": 1.0,
        "total": 2.0,
        "message": "halfway",
    }
    await daemon.request("turn/cancel", {"turnId": started["turnId"]})
    done = await daemon.wait_event(started["turnId"], "turn_completed")
    assert done["event"]["stopReason"] == "cancelled"
    for _ in range(100):
        if "cancelled slow" in log.read_text():
            break
        await asyncio.sleep(0.05)
    lines = [x for x in log.read_text().splitlines() if not x.startswith("pid ")]
    assert lines == ["started slow", "cancelled slow"]


DEPLOY_ANSWERS = {"confirm": True, "environment": "production", "replicas": 3, "note": "go"}


async def test_elicitation_answered_by_the_client_is_recorded(
    jpd_factory: StartJpd, home: Path
) -> None:
    daemon = await jpd_factory(
        responses=[call("deploy", service="api"), {"text": "done"}],
        config=stdio_toml() + unattended("deploy"),
    )
    await daemon.initialize(
        workspaceRoot=str(home),
        capabilities={"prompt": {"answerTypes": ["boolean", "select", "text", "number"]}},
    )

    async def answer(params: dict[str, Any]) -> Any:
        return {"answer": DEPLOY_ANSWERS[params["question"]["id"]]}

    daemon.on_prompt = answer
    started, _ = await daemon.run_turn("deploy")
    [result] = results(daemon, started["turnId"])
    assert result["content"] == "deployed api to production x3 confirm=True note=go"
    questions = [p["question"] for p in daemon.prompts]
    assert [q["id"] for q in questions] == ["confirm", "environment", "replicas", "note"]
    assert questions[0]["context"] == "Deploy api?"
    assert questions[0]["exclusive"] is True
    assert questions[1]["answerType"] == {"type": "select", "options": ["staging", "production"]}
    assert questions[2]["answerType"] == {"type": "number", "minimum": 1, "integer": True}
    assert questions[2]["default"] == 2
    stored = disk_events(home, started["conversationId"])
    recorded = [(e["id"], e.get("answer")) for e in stored if e["type"] == "inquiry_response"]
    assert recorded == [
        ("call_1.confirm.1", True),
        ("call_1.environment.1", "production"),
        ("call_1.replicas.1", 3),
        ("call_1.note.1", "go"),
    ]
    assert next(e["source"] for e in stored if e["type"] == "inquiry_request") == {
        "type": "tool",
        "name": "deploy",
    }


async def test_elicitation_answers_from_config_and_each_detached_mode(
    jpd_factory: StartJpd, home: Path
) -> None:
    daemon = await jpd_factory(
        responses=[call("deploy", service="api"), {"text": "done"}] * 5,
        config=stdio_toml() + unattended("deploy") + "detached_timeout = 0.3\n",
    )
    await daemon.initialize(workspaceRoot=str(home))  # no prompt capability: detached

    async def turn(**params: Any) -> str:
        started, _ = await daemon.run_turn("deploy", **params)
        [result] = results(daemon, started["turnId"])
        return str(result["content"])

    from_config = {
        "conversation": {
            "tools": {
                "deploy": {
                    "questions": {
                        "confirm": {"answer": True},
                        "environment": {"answer": "staging"},
                        "replicas": {"answer": 5},
                        "note": {"answer": "cfg"},
                    }
                }
            }
        }
    }
    assert await turn(config=from_config) == "deployed api to staging x5 confirm=True note=cfg"
    # Exclusive by default: no detached mode may answer for the human; refusals decline.
    for mode in ("deny", "auto", "defer"):
        assert await turn(detached=mode) == "deploy decline", mode
    # `defaults` answers from the schema's defaults once a question is not exclusive.
    partial = {
        "conversation": {
            "tools": {
                "deploy": {
                    "questions": {
                        "confirm": {"answer": True},
                        "environment": {"answer": "staging"},
                        "replicas": {"exclusive": False},
                        "note": {"exclusive": False},
                    }
                }
            }
        }
    }
    assert await turn(config=partial, detached="defaults") == (
        "deployed api to staging x2 confirm=True note="
    )


async def test_elicitation_dismissed_by_the_user_cancels(jpd_factory: StartJpd, home: Path) -> None:
    from pygls.exceptions import JsonRpcException

    daemon = await jpd_factory(
        responses=[call("deploy", service="api"), {"text": "done"}],
        config=stdio_toml() + unattended("deploy"),
    )
    await daemon.initialize(
        workspaceRoot=str(home), capabilities={"prompt": {"answerTypes": ["boolean"]}}
    )

    async def dismiss(params: dict[str, Any]) -> Any:
        raise JsonRpcException(code=-32800, message="user pressed Ctrl-C")

    daemon.on_prompt = dismiss
    started, _ = await daemon.run_turn("deploy")
    [result] = results(daemon, started["turnId"])
    assert result["content"] == "deploy cancel"
    stored = disk_events(home, started["conversationId"])
    [response] = [e for e in stored if e["type"] == "inquiry_response"]
    assert response == {**response, "outcome": "cancelled", "reason": "user"}


async def test_sampling_with_permission_is_served_by_the_model_and_recorded(
    jpd_factory: StartJpd, home: Path
) -> None:
    daemon = await jpd_factory(
        responses=[
            call("summarize", text="long"),
            {"text": "short"},  # the sampling request
            {"text": "done"},
            call("summarize", "call_2", text="again"),
            {"text": "done"},
        ],
        config=stdio_toml() + unattended("summarize"),
    )
    await daemon.initialize(workspaceRoot=str(home), capabilities={"permission": True})
    allow = iter([True, False])

    async def permit(params: dict[str, Any]) -> Any:
        return {"allow": next(allow)}

    daemon.on_permission = permit
    first, _ = await daemon.run_turn("summarize")
    [result] = results(daemon, first["turnId"])
    assert result == {**result, "content": "summary: short", "isError": False}
    [asked] = daemon.permissions
    assert asked["kind"] == "sampling"
    assert asked["toolName"] == "summarize"
    assert asked["arguments"]["messages"] == [{"role": "user", "text": "Summarize: long"}]
    sampling_request = requests(home)[1]
    assert sampling_request["messages"] == [{"role": "user", "content": "Summarize: long"}]
    assert sampling_request.get("tools") in (None, [])
    second, _ = await daemon.run_turn("again", conversationId=first["conversationId"])
    [refused] = results(daemon, second["turnId"])
    assert refused["isError"] is True
    stored = disk_events(home, first["conversationId"])
    samplings = [e for e in stored if e["type"] == "sampling"]
    assert [(s["id"], s["outcome"], s.get("text")) for s in samplings] == [
        ("call_1.sampling.1", "completed", "short"),
        ("call_2.sampling.1", "refused", None),
    ]
    assert samplings[0]["server"] == "fx"


async def test_hanging_call_times_out_and_garbage_server_is_named(
    jpd_factory: StartJpd, home: Path
) -> None:
    log = home / "server.log"
    garbage = home / "garbage_server.py"
    garbage.write_text(
        "import sys, time\nprint('this is not JSON-RPC', flush=True)\n"
        "print('garbage server booting', file=sys.stderr, flush=True)\ntime.sleep(60)\n"
    )
    config = (
        stdio_toml(env={"MCP_FIXTURE_LOG": str(log)})
        + '[conversation.tools.slow]\nrun = "unattended"\ntimeout = 1.0\n'
        + f"[mcp.servers.junk]\ncommand = {json.dumps([sys.executable, str(garbage)])}\n"
        + "startup_timeout = 1.5\n"
        + '[conversation.tools.junk_tool]\nsource = "mcp.junk.anything"\nrun = "unattended"\n'
    )
    daemon = await jpd_factory(
        responses=[
            {
                "tool_calls": [
                    {"id": "c1", "name": "slow", "arguments": {"seconds": 60}},
                    {"id": "c2", "name": "junk_tool", "arguments": {}},
                ]
            },
            {"text": "done"},
        ],
        config=config,
    )
    await daemon.initialize(workspaceRoot=str(home))
    started, events = await daemon.run_turn("go")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    slow, junk = results(daemon, started["turnId"])
    assert slow["isError"] and "timed out after 1s" in slow["content"]
    assert junk["isError"] and "MCP server 'junk'" in junk["content"]
    assert "did not start within 1.5s" in junk["content"]
    assert "garbage server booting" in junk["content"]
    for _ in range(100):  # the timeout cancelled the request at the server
        if "cancelled slow" in log.read_text():
            break
        await asyncio.sleep(0.05)
    assert "cancelled slow" in log.read_text()


async def test_list_changed_refreshes_tools_and_url_elicitation_is_confirmed(
    jpd_factory: StartJpd, home: Path
) -> None:
    daemon = await jpd_factory(
        responses=[
            {
                "tool_calls": [
                    {"id": "c1", "name": "grow", "arguments": {}},
                    {"id": "c2", "name": "login", "arguments": {}},
                ]
            },
            {"text": "done"},
            call("late", "c3"),
            {"text": "done"},
        ],
        config=stdio_toml() + unattended("grow", "login", "late"),
    )
    await daemon.initialize(
        workspaceRoot=str(home), capabilities={"prompt": {"answerTypes": ["boolean"]}}
    )

    async def confirm(params: dict[str, Any]) -> Any:
        return {"answer": True}

    daemon.on_prompt = confirm
    first, _ = await daemon.run_turn("grow and log in")
    grow, login = results(daemon, first["turnId"])
    assert (grow["content"], login["content"]) == ("grown", "login accept")
    [url] = [p["question"] for p in daemon.prompts]
    assert url["id"] == "url" and "https://example.com/login" in url["text"]
    assert url["context"] == "Log in to continue"
    assert "late" not in [t["name"] for t in requests(home)[0]["tools"]]
    second, _ = await daemon.run_turn("late", conversationId=first["conversationId"])
    [late] = results(daemon, second["turnId"])
    assert late["content"] == "late tool"
    assert "late" in [t["name"] for t in requests(home)[2]["tools"]]


async def test_servers_from_turn_config_and_tool_call(jpd_factory: StartJpd, home: Path) -> None:
    """How `jp acp` passes a session's `mcpServers`: as `turn/start` config."""
    daemon = await jpd_factory(
        responses=[call("summarize", text="abc"), {"text": "tiny"}, {"text": "done"}]
    )
    await daemon.initialize(workspaceRoot=str(home))  # no permission capability
    server = {"command": [sys.executable, str(SERVER)], "sampling": "unattended"}
    overrides = {
        "mcp": {"servers": {"session": server}},
        "conversation": {"tools": {"summarize": {"run": "unattended"}}},
    }
    started, _ = await daemon.run_turn("summarize", config=overrides)
    [result] = results(daemon, started["turnId"])
    assert result == {**result, "content": "summary: tiny", "isError": False}
    assert daemon.permissions == []  # sampling = "unattended": no permission asked
    # Not in the client's own config: tool/call does not know the session's server.
    missing = await daemon.request("tool/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
    assert missing["isError"] and "does not exist" in missing["content"]


async def test_server_that_died_while_idle_is_restarted_before_the_call(
    jpd_factory: StartJpd, home: Path
) -> None:
    log = home / "server.log"
    daemon = await jpd_factory(
        responses=[
            call("echo", text="one"),
            {"text": "ok"},
            call("echo", "c2", text="two"),
            {"text": "ok"},
        ],
        config=stdio_toml(env={"MCP_FIXTURE_LOG": str(log)}) + unattended("echo"),
    )
    await daemon.initialize(workspaceRoot=str(home))
    first, _ = await daemon.run_turn("one")
    [pid] = [int(x.split()[1]) for x in log.read_text().splitlines() if x.startswith("pid ")]
    os.kill(pid, signal.SIGKILL)
    await asyncio.sleep(2.5)  # idle long enough to be pinged before the next call
    second, _ = await daemon.run_turn("two", conversationId=first["conversationId"])
    [result] = results(daemon, second["turnId"])
    assert result == {**result, "content": "echo:two:", "isError": False}
    assert len([x for x in log.read_text().splitlines() if x.startswith("pid ")]) == 2


async def test_elicitation_question_answered_by_the_assistant_when_allowed(
    jpd_factory: StartJpd, home: Path
) -> None:
    daemon = await jpd_factory(
        responses=[call("deploy", service="api"), {"answer_inquiry": "true"}, {"text": "done"}],
        config=stdio_toml()
        + unattended("deploy")
        + "[conversation.tools.deploy.questions]\n"
        + 'confirm = { target = "assistant", exclusive = false }\n'
        + 'environment = { answer = "staging" }\nreplicas = { answer = 4 }\n'
        + 'note = { answer = "by model" }\n',
    )
    await daemon.initialize(workspaceRoot=str(home))
    started, _ = await daemon.run_turn("deploy")
    [result] = results(daemon, started["turnId"])
    assert result["content"] == "deployed api to staging x4 confirm=True note=by model"
    side = requests(home)[1]
    assert "call_1.confirm.1" in json.dumps(side["messages"][-1])
    stored = disk_events(home, started["conversationId"])
    answers = {e["id"]: e.get("answer") for e in stored if e["type"] == "inquiry_response"}
    assert answers["call_1.confirm.1"] is True
