"""`jp` answering the daemon's questions in a real pseudo-terminal, against a real
`jpd --listen` with the scripted model: booleans (remembered), select, secrets,
`ask_user`, permissions, dismissal, tool toggles, and `jp inquiry ls/answer`."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pexpect

from tests.e2e.harness import data_files
from tests.e2e.sockets import Daemons, run_jp, socket_env
from tests.e2e.test_inquiries import asker
from tests.e2e.test_jp_socket import finish, persisted, spawn_jp
from tests.e2e.test_tools import ECHO, call
from tests.e2e.tools import make_tool, tool_toml

SECRET = "pty-s3cret-value-91c4"
PROCEED = r"Proceed\? \[y/n/Y/N\] "
SECRET_TOOL = """
if "q" not in answers:
    print(json.dumps({"type": "needs_input", "question": {
        "id": "q", "text": "API token?", "answer_type": {"type": "secret"}}}))
else:
    print("len=" + str(len(answers["q"])))
"""


def prompt_env(home: Path, responses: list[dict[str, Any]], tools: str = "") -> dict[str, str]:
    """A daemon environment whose scripted model's requests are recorded, with `tools`."""
    env = socket_env(home, responses)
    config = Path(env["JP_CONFIG"])
    record = f'record = "{home / "requests.jsonl"}"\n'
    config.write_text(config.read_text().replace("[daemon]", record + "[daemon]") + tools)
    env.update(TERM="xterm-256color", COLUMNS="80", LINES="24")
    return env


def asker_tool(home: Path, body: str | None = None) -> str:
    return tool_toml("asker", make_tool(home, "asker", body or asker()), run='"unattended"')


def echo_tool(home: Path, run: str) -> str:
    command = make_tool(home, "echo", ECHO)
    return tool_toml("echo", command, run=f'"{run}"') + 'parameters.text = { type = "string" }\n'


def spawn(env: dict[str, str], *args: str) -> tuple[pexpect.spawn, io.StringIO]:
    """`jp` in a pseudo-terminal, with a transcript of everything it shows."""
    child = spawn_jp(env, *args)
    transcript = io.StringIO()
    child.logfile_read = transcript
    return child, transcript


def the_conversation(env: dict[str, str]) -> str:
    [conversation] = (Path(env["JP_DATA_DIR"]) / "conversations").iterdir()
    return conversation.name


def tool_results(env: dict[str, str]) -> list[dict[str, Any]]:
    events = persisted(env, the_conversation(env))
    return [e for e in events if e["type"] == "tool_call_response"]


def inquiry_responses(env: dict[str, str]) -> list[dict[str, Any]]:
    events = persisted(env, the_conversation(env))
    return [e for e in events if e["type"] == "inquiry_response"]


def recorded(home: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (home / "requests.jsonl").read_text().splitlines()]


def files_containing(root: Path, text: str) -> list[Path]:
    return [path for path, content in data_files(root).items() if text.encode() in content]


def wait_pending(env: dict[str, str]) -> list[dict[str, Any]]:
    """Poll `jp inquiry ls -F json` until something waits for an answer."""
    deadline = time.monotonic() + 60
    while True:
        listed = run_jp(env, "inquiry", "ls", "-F", "json")
        assert listed.returncode == 0, listed.stderr
        inquiries: list[dict[str, Any]] = json.loads(listed.stdout)["inquiries"]
        if inquiries:
            return inquiries
        assert time.monotonic() < deadline, "no question became pending"
        time.sleep(0.05)


# --- prompts in the terminal -----------------------------------------------------------


async def test_boolean_answered_uppercase_is_remembered_for_the_turn(
    tmp_path: Path, daemons: Daemons
) -> None:
    responses = [call("asker", "c1"), call("asker", "c2"), {"text": "all done"}]
    env = prompt_env(tmp_path, responses, asker_tool(tmp_path))
    await daemons.start(env)
    child, transcript = spawn(env, "query", "--new", "go")
    child.expect("── asker ──")
    child.expect(PROCEED)
    child.sendline("Y")
    child.expect("all done")
    assert finish(child) == 0
    assert transcript.getvalue().count("Proceed?") == 1  # the second call was not asked
    assert [r["content"].strip() for r in tool_results(env)] == ["got=true", "got=true"]
    assert [r["answer"] for r in inquiry_responses(env)] == [True, True]


async def test_select_answered_by_number(tmp_path: Path, daemons: Daemons) -> None:
    select = '{"type": "select", "options": ["main", "dev", "release"]}'
    env = prompt_env(
        tmp_path, [call("asker"), {"text": "done"}], asker_tool(tmp_path, asker(select))
    )
    await daemons.start(env)
    child, _ = spawn(env, "query", "--new", "go")
    child.expect(r"1\. main\s+2\. dev\s+3\. release\s+Choose 1-3: ")
    child.sendline("7")
    child.expect(r"please choose a number from 1 to 3\s+Choose 1-3: ")
    child.sendline("2")
    child.expect("done")
    assert finish(child) == 0
    assert [r["content"].strip() for r in tool_results(env)] == ['got="dev"']


async def test_secret_is_not_echoed_and_never_stored(tmp_path: Path, daemons: Daemons) -> None:
    env = prompt_env(
        tmp_path, [call("asker"), {"text": "stored safely"}], asker_tool(tmp_path, SECRET_TOOL)
    )
    await daemons.start(env)
    child, transcript = spawn(env, "query", "--new", "go")
    child.expect(r"API token\? \(hidden\) ")
    child.sendline(SECRET)
    child.expect("stored safely")
    assert finish(child) == 0
    assert SECRET not in transcript.getvalue()  # the terminal never showed it
    assert [r["content"].strip() for r in tool_results(env)] == [f"len={len(SECRET)}"]
    assert [r["outcome"] for r in inquiry_responses(env)] == ["redacted"]
    assert not files_containing(tmp_path, SECRET)  # data dir, logs, the model's requests


async def test_ask_user_question_under_the_assistant_header(
    tmp_path: Path, daemons: Daemons
) -> None:
    ask = call(
        "ask_user",
        question="What is your name?",
        answer_type="text",
        context="I will greet you by name.",
    )
    env = prompt_env(tmp_path, [ask, {"text": "Nice to meet you, Alice!"}])
    await daemons.start(env)
    child, transcript = spawn(env, "query", "--new", "hello")
    child.expect("── Assistant ──")
    child.expect("I will greet you by name.")
    child.expect(r"What is your name\? ")
    child.sendline("Alice")
    child.expect("Nice to meet you")
    assert finish(child) == 0
    shown = transcript.getvalue()
    at = shown.index("── Assistant ──")  # after the compact tool call line
    for part in ("I will greet you by name.", "What is your name?", "Alice", "Nice to meet"):
        at = shown.index(part, at)  # each after the one before
    [result] = tool_results(env)
    assert json.loads(result["content"]) == {"answer_type": "text", "answer": "Alice"}
    assert "Alice" in json.dumps(recorded(tmp_path)[-1]["messages"])


async def test_permission_allowed_then_denied(tmp_path: Path, daemons: Daemons) -> None:
    responses = [call("echo", "c1", text="one"), call("echo", "c2", text="two"), {"text": "ok"}]
    env = prompt_env(tmp_path, responses, echo_tool(tmp_path, "ask"))
    await daemons.start(env)
    child, _ = spawn(env, "query", "--new", "go")
    child.expect(r'the assistant wants to run ⚙ echo\(text="one"\)\s+Allow running echo\? ')
    child.sendline("y")
    child.expect(r'run ⚙ echo\(text="two"\)\s+Allow running echo\? ')
    child.sendline("maybe")
    child.expect(r"please answer y or n")
    child.sendline("n")
    child.expect(r"Why not\? ")
    child.sendline("")  # Enter: no reason given
    child.expect("ok")
    assert finish(child) == 0
    first, second = tool_results(env)
    assert first["content"].startswith("echo:one") and not first["is_error"]
    assert second["is_error"] and "denied" in second["content"]


async def test_ctrl_c_at_a_prompt_cancels_the_question_only(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = prompt_env(tmp_path, [call("asker"), {"text": "carried on"}], asker_tool(tmp_path))
    await daemons.start(env)
    child, _ = spawn(env, "query", "--new", "go")
    child.expect(PROCEED)
    child.sendintr()
    child.expect("question dismissed")
    child.expect("carried on")
    assert finish(child) == 0
    [response] = inquiry_responses(env)
    assert (response["outcome"], response["reason"]) == ("cancelled", "user")


async def test_question_answered_elsewhere_is_dismissed(tmp_path: Path, daemons: Daemons) -> None:
    env = prompt_env(tmp_path, [call("asker"), {"text": "finished"}], asker_tool(tmp_path))
    await daemons.start(env)
    child, _ = spawn(env, "query", "--new", "go")
    child.expect(PROCEED)
    [pending] = wait_pending(env)
    assert not pending["deferred"]  # being asked in the terminal
    answered = run_jp(env, "inquiry", "answer", pending["inquiryId"], "false")
    assert answered.returncode == 0, answered.stderr
    child.expect("answered elsewhere")
    child.expect("finished")
    assert finish(child) == 0
    assert [r["content"].strip() for r in tool_results(env)] == ["got=false"]


# --- toggles and `jp inquiry` ----------------------------------------------------------


async def test_tool_toggles_reach_the_model_in_order(tmp_path: Path, daemons: Daemons) -> None:
    tools = echo_tool(tmp_path, "unattended") + tool_toml("keep", "/bin/true", enable='"always"')
    env = prompt_env(tmp_path, [{"text": "one"}, {"text": "two"}], tools)
    await daemons.start(env)
    first = run_jp(env, "query", "--new", "-T", "-t", "echo", "hi")
    assert first.returncode == 0, first.stderr
    second = run_jp(env, "query", "-T", "ask_user", "-t", "echo", "hi")
    assert second.returncode == 0, second.stderr
    refused = run_jp(env, "query", "-T", "keep", "hi")
    assert refused.returncode == 1
    assert refused.stderr.startswith("jp: ") and "cannot be disabled per turn" in refused.stderr
    first_tools, second_tools = ({t["name"] for t in r["tools"]} for r in recorded(tmp_path))
    # A bulk -T leaves tools that refuse it (ask_user: if_named, keep: always).
    assert first_tools == {"ask_user", "echo", "keep", "answer_inquiry"}
    assert "ask_user" not in second_tools and {"echo", "keep"} <= second_tools


async def test_inquiry_ls_and_answer_a_deferred_question(tmp_path: Path, daemons: Daemons) -> None:
    env = prompt_env(tmp_path, [call("asker"), {"text": "done"}], asker_tool(tmp_path))
    await daemons.start(env)
    started = run_jp(env, "query", "--new", "--detach", "go")
    assert started.returncode == 0, started.stderr
    conversation_id = started.stdout.split()[0]
    [pending] = wait_pending(env)
    assert pending["deferred"] and pending["inquiryId"] == "call_1.q.1"

    listed = run_jp(env, "inquiry", "ls")
    assert listed.returncode == 0
    assert listed.stdout.startswith("call_1.q.1  asker  Proceed? [boolean]  deferred since ")
    unknown = run_jp(env, "inquiry", "answer", "nope", "true")
    assert unknown.returncode == 1 and unknown.stderr.startswith("jp: no pending inquiry nope")
    invalid = run_jp(env, "inquiry", "answer", "call_1.q.1", "maybe")
    assert invalid.returncode == 1 and "must be true or false" in invalid.stderr
    answered = run_jp(env, "inquiry", "answer", "call_1.q.1", "true")
    assert (answered.returncode, answered.stdout) == (0, "answered call_1.q.1\n")

    # The turn may have ended already: replay it all (`--from-seq 0`), live or not.
    attached = run_jp(env, "attach", conversation_id, "--from-seq", "0")
    assert (attached.returncode, attached.stdout) == (0, "done\n")
    assert [r["content"].strip() for r in tool_results(env)] == ["got=true"]
    empty = run_jp(env, "inquiry", "ls")
    assert (empty.stdout, empty.stderr) == ("", "jp: no pending questions\n")


async def test_inquiry_answer_a_deferred_permission(tmp_path: Path, daemons: Daemons) -> None:
    responses = [call("echo", "c1", text="one"), {"text": "done"}]
    env = prompt_env(tmp_path, responses, echo_tool(tmp_path, "ask"))
    await daemons.start(env)
    assert run_jp(env, "query", "--new", "--detach", "go").returncode == 0
    [pending] = wait_pending(env)
    assert pending["inquiryId"] == "c1.permission.run"
    listed = run_jp(env, "inquiry", "ls").stdout
    assert "c1.permission.run  echo  permission to run echo (answer true or false)" in listed
    assert run_jp(env, "inquiry", "answer", "c1.permission.run", "true").returncode == 0
    assert run_jp(env, "attach", "--from-seq", "0").stdout == "done\n"
    [result] = tool_results(env)
    assert result["content"].startswith("echo:one") and not result["is_error"]


async def test_attach_on_a_terminal_answers_a_deferred_question(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = prompt_env(tmp_path, [call("asker"), {"text": "welcome back"}], asker_tool(tmp_path))
    await daemons.start(env)
    started = run_jp(env, "query", "--new", "--detach", "go")
    conversation_id = started.stdout.split()[0]
    wait_pending(env)
    child, transcript = spawn(env, "attach", conversation_id)
    child.expect(PROCEED)
    child.sendline("n")
    child.expect("welcome back")
    assert finish(child) == 0
    shown = transcript.getvalue()
    assert shown.index("⚙ asker") < shown.index("Proceed?")  # the replay came first
    assert [r["content"].strip() for r in tool_results(env)] == ["got=false"]
