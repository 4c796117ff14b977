"""`jp` as a daily tool, through the real `jp` and `jpd --listen`: choosing the
conversation (per workspace, prefixes, `conversation use`), piped input, `jp turn
cancel`, quitting with Ctrl-C, tool call ends, and no silent waits."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.e2e.sockets import Daemons, run_jp, socket_env
from tests.e2e.test_jp_prompts import SECRET_TOOL, prompt_env, tool_results, wait_pending
from tests.e2e.test_jp_socket import SLOW, finish, persisted, spawn_jp
from tests.e2e.test_tools import call
from tests.e2e.tools import make_tool, tool_toml
from tests.fixtures.fake_llm_server import FakeLLMServer
from tests.fixtures.llm_wire import json_reply


def jp_in(
    env: Mapping[str, str], cwd: Path, *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jpcli", *args],
        cwd=cwd,
        env=dict(env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def start_jp(env: Mapping[str, str], cwd: Path, *args: str) -> subprocess.Popen[str]:
    """`jp` running in the background without a terminal, its output piped."""
    return subprocess.Popen(
        [sys.executable, "-m", "jpcli", *args],
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def requests_of(env: Mapping[str, str], conversation_id: str) -> list[str]:
    return [
        e["content"] for e in persisted(dict(env), conversation_id) if e["type"] == "chat_request"
    ]


def started_ids(result: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    assert result.returncode == 0, result.stderr
    conversation_id, turn_id = result.stdout.split()
    return conversation_id, turn_id


async def test_each_workspace_continues_its_own_conversation(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path, [{"text": "ok"}] * 10)
    await daemons.start(env)
    one, two = tmp_path / "one", tmp_path / "two"
    (one / ".git").mkdir(parents=True)
    (one / "sub").mkdir()
    two.mkdir()
    a, _ = started_ids(jp_in(env, one, "query", "--detach", "first in one"))
    b, _ = started_ids(jp_in(env, two, "query", "--detach", "first in two"))
    assert a != b  # no workspace had a conversation yet: each starts its own
    assert jp_in(env, one / "sub", "query", "again in one").returncode == 0  # same workspace
    assert jp_in(env, two, "query", "again in two").returncode == 0
    assert requests_of(env, a) == ["first in one", "again in one"]
    assert requests_of(env, b) == ["first in two", "again in two"]

    # Prefix picks, `conversation use`, and the marker in `conversation ls`.
    prefix = a[: len(a) - 3]
    if b.startswith(prefix):
        prefix = a
    assert jp_in(env, two, "query", "--conversation", prefix, "to one").returncode == 0
    assert requests_of(env, a)[-1] == "to one"
    ambiguous = jp_in(env, two, "query", "--conversation", "c-", "x")
    assert ambiguous.returncode == 1 and "matches 2 conversations" in ambiguous.stderr
    used = jp_in(env, two, "conversation", "use", a)
    assert used.returncode == 0 and str(two) in used.stdout
    assert jp_in(env, two, "query", "now one").returncode == 0
    assert requests_of(env, a)[-1] == "now one"
    listed = jp_in(env, two, "conversation", "ls").stdout.splitlines()
    assert listed[0].split() == ["ID", "UPDATED", "EVENTS", "TITLE"]
    assert [line[0] for line in listed[1:]].count("*") == 1
    assert any(line.startswith("*" + a) for line in listed[1:])


async def test_a_failed_first_turn_is_not_silently_continued(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path, [{"text": "ok"}, {"error": "model exploded"}, {"text": "later"}])
    await daemons.start(env)
    first, _ = started_ids(jp_in(env, tmp_path, "query", "--detach", "one"))
    jp_in(env, tmp_path, "attach", "--from-seq", "0")  # wait for it
    failed = jp_in(env, tmp_path, "query", "--new", "two")
    assert failed.returncode == 1
    assert f"the next `jp query` continues {first}" in failed.stderr
    assert jp_in(env, tmp_path, "query", "three").returncode == 0
    assert requests_of(env, first) == ["one", "three"]


async def test_piped_input_is_sent_with_the_message(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path)
    await daemons.start(env)
    diff = "-old line\n+new line\n"
    result = jp_in(env, tmp_path, "query", "--new", "review this", stdin=diff)
    assert result.returncode == 0, result.stderr
    [conversation] = (Path(env["JP_DATA_DIR"]) / "conversations").iterdir()
    assert requests_of(env, conversation.name) == [f"review this\n\n<stdin>\n{diff}</stdin>"]
    big = jp_in({**env, "JP_STDIN_LIMIT": "8"}, tmp_path, "query", "x", stdin=diff)
    assert big.returncode == 2 and "piped input is larger than 8 bytes" in big.stderr
    assert len(list((Path(env["JP_DATA_DIR"]) / "conversations").iterdir())) == 1


async def test_turn_cancel_stops_the_running_turn(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path, [SLOW] * 3)
    await daemons.start(env)
    conversation_id, turn_id = started_ids(jp_in(env, tmp_path, "query", "--detach", "story"))
    cancelled = jp_in(env, tmp_path, "turn", "cancel")  # this workspace's conversation
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout == f"cancelled {turn_id} in {conversation_id}\n"
    end = persisted(env, conversation_id)[-1]
    assert (end["type"], end["stop_reason"]) == ("turn_end", "cancelled")
    again = jp_in(env, tmp_path, "turn", "cancel", conversation_id[:-2])
    assert (again.returncode, again.stderr) == (
        4,
        f"jp: no turn is running in {conversation_id[:-2]}\n",
    )


async def test_attach_with_nothing_running_says_so(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path)
    await daemons.start(env)
    assert jp_in(env, tmp_path, "query", "hi").returncode == 0
    attached = jp_in(env, tmp_path, "attach")
    assert (attached.returncode, attached.stdout) == (4, "")
    assert "no turn is running" in attached.stderr


async def test_ctrl_c_at_the_choice_cancels_and_waits(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path, [SLOW])
    env.update(TERM="xterm-256color", COLUMNS="80", LINES="24")
    await daemons.start(env)
    child = spawn_jp(env, "query", "--new", "tell a story")
    child.expect("tick")
    child.sendintr()
    child.expect(r"\[c\]ancel")
    child.sendintr()  # quitting: the turn is cancelled, and jp waits for its end
    child.expect("cancelling the turn; waiting up to")
    assert finish(child) == 130
    listed = json.loads(run_jp(env, "conversation", "ls", "-F", "json").stdout)
    events = persisted(env, listed["conversations"][0]["conversationId"])
    assert (events[-1]["type"], events[-1]["stop_reason"]) == ("turn_end", "cancelled")
    assert json.loads(run_jp(env, "turn", "ls", "-F", "json").stdout)["turns"] == []


async def test_ctrl_c_then_resume_keeps_streaming(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path, [SLOW])
    env.update(TERM="xterm-256color", COLUMNS="80", LINES="24")
    await daemons.start(env)
    child = spawn_jp(env, "query", "--new", "tell a story")
    child.expect("tick")
    child.sendintr()
    child.expect(r"\[r\]esume")
    child.send("r")
    assert finish(child) == 0
    listed = json.loads(run_jp(env, "conversation", "ls", "-F", "json").stdout)
    events = persisted(env, listed["conversations"][0]["conversationId"])
    assert events[-1]["stop_reason"] == "end_turn"


async def test_each_tool_end_is_shown_with_its_duration(tmp_path: Path, daemons: Daemons) -> None:
    ok = make_tool(
        tmp_path,
        "fine",
        'print(json.dumps({"type": "success", "content": "line one\\nline two"}))\n',
    )
    bad = make_tool(
        tmp_path, "broken", 'print(json.dumps({"type": "error", "message": "first\\nsecond"}))\n'
    )
    tools = tool_toml("fine", ok, run='"unattended"') + tool_toml("broken", bad, run='"unattended"')
    both = [*call("fine", "c1")["tool_calls"], *call("broken", "c2")["tool_calls"]]
    env = prompt_env(tmp_path, [{"tool_calls": both}, {"text": "done"}], tools)
    await daemons.start(env)
    result = run_jp(env, "query", "--new", "go")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert any(re.fullmatch(r"✓ fine \d+\.\ds: line one", line) for line in lines), lines
    at = next(i for i, line in enumerate(lines) if line.startswith("✗ broken"))
    assert re.fullmatch(r"✗ broken \d+\.\ds", lines[at])
    assert lines[at + 1 : at + 3] == ["  first", "  second"]


async def test_inquiry_answer_takes_a_secret_only_hidden_or_from_stdin(
    tmp_path: Path, daemons: Daemons
) -> None:
    secret = "from-stdin-7d1e"
    tools = tool_toml("asker", make_tool(tmp_path, "asker", SECRET_TOOL), run='"unattended"')
    env = prompt_env(tmp_path, [call("asker"), {"text": "done"}], tools)
    await daemons.start(env)
    assert run_jp(env, "query", "--new", "--detach", "go").returncode == 0
    [pending] = wait_pending(env)
    refused = run_jp(env, "inquiry", "answer", pending["inquiryId"], secret)
    assert refused.returncode == 2 and "never taken from the command line" in refused.stderr
    answered = run_jp(env, "inquiry", "answer", pending["inquiryId"], stdin=secret + "\n")
    assert answered.returncode == 0, answered.stderr
    assert run_jp(env, "attach", "--from-seq", "0").stdout == "done\n"
    assert [r["content"].strip() for r in tool_results(env)] == [f"len={len(secret)}"]


async def test_each_tool_result_is_sent_when_its_call_ends(
    tmp_path: Path, daemons: Daemons
) -> None:
    slow = make_tool(tmp_path, "slow", 'time.sleep(1.5)\nprint("slow done")\n')
    fast = make_tool(tmp_path, "fast", 'print("fast done")\n')
    tools = tool_toml("slow", slow, run='"unattended"') + tool_toml(
        "fast", fast, run='"unattended"'
    )
    both = [*call("slow", "c1")["tool_calls"], *call("fast", "c2")["tool_calls"]]
    env = prompt_env(tmp_path, [{"tool_calls": both}, {"text": "done"}], tools)
    await daemons.start(env)
    result = run_jp(env, "query", "--new", "-F", "json", "go")
    assert result.returncode == 0, result.stderr
    events = [json.loads(line)["event"] for line in result.stdout.splitlines()]
    ends = [e["id"] for e in events if e["kind"] == "tool_result"]
    assert ends == ["c2", "c1"]  # the fast call is not held back by the slow one
    [conversation] = (Path(env["JP_DATA_DIR"]) / "conversations").iterdir()
    recorded = [
        e["id"] for e in persisted(env, conversation.name) if e["type"] == "tool_call_response"
    ]
    assert recorded == ["c2", "c1"]


async def test_a_waiting_question_is_announced_once(tmp_path: Path, daemons: Daemons) -> None:
    from tests.e2e.test_jp_prompts import asker_tool

    env = prompt_env(tmp_path, [call("asker"), {"text": "done"}], asker_tool(tmp_path))
    await daemons.start(env)
    process = start_jp(env, tmp_path, "query", "--new", "go")
    try:
        [pending] = wait_pending(env)
        assert process.stderr is not None
        line = process.stderr.readline()
        while line.startswith("⚙"):  # the tool call line comes first
            line = process.stderr.readline()
        assert line.startswith("jp: a question waits: Proceed? [boolean]; answer it with: ")
        assert f"jp inquiry answer {pending['inquiryId']} VALUE" in line
        assert run_jp(env, "inquiry", "answer", pending["inquiryId"], "true").returncode == 0
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert (process.returncode, out) == (0, "done\n")
    assert "a question waits" not in err  # said once


async def test_models_and_aliases(tmp_path: Path, daemons: Daemons) -> None:
    with contextlib.ExitStack() as stack:
        await _models_and_aliases(tmp_path, daemons, stack)


async def _models_and_aliases(
    tmp_path: Path, daemons: Daemons, stack: contextlib.ExitStack
) -> None:
    env = socket_env(tmp_path)
    config = Path(env["JP_CONFIG"])
    ollama = FakeLLMServer(default=json_reply(200, {"models": [{"name": "qwen3:8b"}]}))
    stack.enter_context(ollama)
    config.write_text(
        config.read_text()
        + '[aliases]\nfast = "test/scripted"\n'
        + f'[providers.ollama]\nbase_url = "{ollama.base_url}"\n'
    )
    await daemons.start({k: v for k, v in env.items() if k != "ANTHROPIC_API_KEY"})
    client = {k: v for k, v in env.items() if k != "ANTHROPIC_API_KEY"}
    listed = run_jp(client, "models")
    assert listed.returncode == 0, listed.stderr
    assert "default model: test/scripted" in listed.stdout
    assert re.search(r"^  test +ready$", listed.stdout, re.M)
    assert re.search(r"^  anthropic +unavailable: .*ANTHROPIC_API_KEY", listed.stdout, re.M)
    assert "  fast = test/scripted" in listed.stdout
    assert re.search(r"^  google +unavailable: .*GEMINI_API_KEY", listed.stdout, re.M)
    # The models the Ollama server has (its `/api/tags`).
    assert re.search(r"^  ollama +ready$", listed.stdout, re.M)
    assert "    ollama/qwen3:8b\n" in listed.stdout
    assert [r.path for r in ollama.requests] == ["/api/tags"]
    keyed = run_jp({**client, "ANTHROPIC_API_KEY": "k"}, "models", "-F", "json")
    providers = {p["name"]: p for p in json.loads(keyed.stdout)["providers"]}
    assert providers["anthropic"]["available"] and providers["anthropic"]["keyVariable"] == (
        "ANTHROPIC_API_KEY"
    )
    aliased = run_jp(client, "query", "--new", "-m", "fast", "-F", "json", "hi")
    assert aliased.returncode == 0, aliased.stderr
    assert json.loads(aliased.stdout.splitlines()[0])["event"]["model"] == "test/scripted"
    unknown = run_jp(client, "query", "--new", "-m", "nope", "hi")
    assert unknown.returncode == 1 and "model id must be '<provider>/<model>'" in unknown.stderr


def complete_bash(env: Mapping[str, str], script: str, *words: str) -> list[str]:
    """Run the bash completion function on `words` (the last is being typed)."""
    bin_dir = str(Path(sys.executable).parent)
    quoted = " ".join(f'"{w}"' for w in words)
    program = (
        f"{script}\nCOMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; _jp; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    result = subprocess.run(
        ["bash", "-c", program],
        env={**env, "PATH": bin_dir + ":" + env.get("PATH", "")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if line]


async def test_bash_completion_knows_commands_and_conversation_ids(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path)
    await daemons.start(env)
    conversation_id, _ = started_ids(jp_in(env, tmp_path, "query", "--detach", "hi"))
    script = run_jp(env, "completion", "bash").stdout
    assert complete_bash(env, script, "jp", "conv") == ["conversation"]
    assert complete_bash(env, script, "jp", "turn", "") == [
        "ls",
        "list",
        "cancel",
        "resume",
        "undo",
        "diff",
    ]
    assert complete_bash(env, script, "jp", "attach", "c-") == [conversation_id]
    assert complete_bash(env, script, "jp", "conversation", "use", "") == [conversation_id]
    assert complete_bash(env, script, "jp", "query", "--conversation", "") == [conversation_id]
    for shell in ("zsh", "fish"):
        other = run_jp(env, "completion", shell)
        assert other.returncode == 0 and "jp conversation ls --ids" in other.stdout


MULTI_TOOL = """
if "q" not in answers:
    print(json.dumps({"type": "needs_input", "question": {
        "id": "q", "text": "Which colours?",
        "answer_type": {"type": "multi_select", "options": ["red", "green", "blue"]}}}))
elif "n" not in answers:
    print(json.dumps({"type": "needs_input", "question": {
        "id": "n", "text": "How many?",
        "answer_type": {"type": "number", "integer": True, "minimum": 1, "maximum": 9}}}))
else:
    print("got=" + json.dumps([answers["q"], answers["n"]]))
"""


async def test_multi_select_and_number_questions_at_the_terminal(
    tmp_path: Path, daemons: Daemons
) -> None:
    tools = tool_toml("asker", make_tool(tmp_path, "asker", MULTI_TOOL), run='"unattended"')
    env = prompt_env(tmp_path, [call("asker"), {"text": "done"}], tools)
    await daemons.start(env)
    child = spawn_jp(env, "query", "--new", "go")
    child.expect(r"Choose any of 1-3")
    child.sendline("3,1")
    child.expect(r"How many\? \[1\.\.9\]")
    child.sendline("12")
    child.expect("at most 9")
    child.sendline("4")
    child.expect("done")
    assert finish(child) == 0
    assert [r["content"].strip() for r in tool_results(env)] == ['got=[["blue", "red"], 4]']
