"""`jp chat` in a real pseudo-terminal against a real `jpd --listen` with the scripted
model: streaming, continuing the conversation, `/new`, a permission prompt answered in
the REPL, Ctrl-C cancelling a slow turn, Ctrl-D leaving with exit 0."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.sockets import Daemons
from tests.e2e.test_jp_prompts import echo_tool, prompt_env, spawn
from tests.e2e.test_jp_socket import SLOW, finish, persisted
from tests.e2e.test_tools import call


def turn_ends(env: dict[str, str], conversation: str) -> list[str]:
    return [e["stop_reason"] for e in persisted(env, conversation) if e["type"] == "turn_end"]


async def test_chat_session(tmp_path: Path, daemons: Daemons) -> None:
    responses = [
        {"text": "first answer"},
        {"text": "second answer"},
        call("echo", "c1", text="one"),
        {"text": "tool done"},
        SLOW,
    ]
    env = prompt_env(tmp_path, responses, echo_tool(tmp_path, "ask"))
    env["PROMPT_TOOLKIT_NO_CPR"] = "1"
    await daemons.start(env)
    child, transcript = spawn(env, "chat")
    child.expect("/help for commands")
    child.expect("jp>")
    child.send("hello\r")
    child.expect("first answer")
    child.expect("jp>")
    child.send("again\r")
    child.expect("second answer")
    child.expect("jp>")
    child.send("/new\r")
    child.expect("starts a new conversation")
    child.expect("jp>")
    child.send("use the tool\r")
    child.expect(r'the assistant wants to run ⚙ echo\(text="one"\)\s+Allow running echo\? ')
    child.send("y\r")
    child.expect("tool done")
    child.expect("jp>")
    child.send("tell a story\r")
    child.expect("tick")
    child.sendintr()
    child.expect("cancelled")
    child.expect("jp>")
    child.sendeof()
    assert finish(child) == 0
    conversations = sorted(p.name for p in (Path(env["JP_DATA_DIR"]) / "conversations").iterdir())
    assert len(conversations) == 2, transcript.getvalue()
    ends = sorted(turn_ends(env, c) for c in conversations)
    assert ends == [["end_turn", "cancelled"], ["end_turn", "end_turn"]]
    history = (Path(env["JP_STATE_DIR"]) / "chat_history").read_text()
    assert "hello" in history and "/new" in history


async def test_multi_line_input_and_model_command(tmp_path: Path, daemons: Daemons) -> None:
    env = prompt_env(tmp_path, [{"text": "noted"}])
    env["PROMPT_TOOLKIT_NO_CPR"] = "1"
    config = Path(env["JP_CONFIG"])
    config.write_text(config.read_text() + '[aliases]\nsame = "test/scripted"\n')
    await daemons.start(env)
    child, _ = spawn(env, "chat", "--new")
    child.expect("jp>")
    child.send("/model same\r")
    child.expect("model: same")
    child.expect("jp>")
    child.send("one \\\r")  # a trailing backslash continues the message
    child.expect(r"\.\.\.")
    child.send("two\x1b\r")  # Esc then Enter: a new line in the same input
    child.send("three\r")
    child.expect("noted")
    child.expect("jp>")
    child.sendeof()
    assert finish(child) == 0
    [conversation] = (Path(env["JP_DATA_DIR"]) / "conversations").iterdir()
    events = persisted(env, conversation.name)
    [request] = [e for e in events if e["type"] == "chat_request"]
    assert request["content"] == "one \ntwo\nthree"


async def test_cfg_for_every_turn_and_attachments_with_the_first(
    tmp_path: Path, daemons: Daemons
) -> None:
    import json

    env = prompt_env(tmp_path, [{"text": "arr"}, {"text": "arr again"}])
    env["PROMPT_TOOLKIT_NO_CPR"] = "1"
    persona = tmp_path / "pirate.toml"
    persona.write_text('[assistant]\nsystem_prompt = "You are a pirate."\n')
    await daemons.start(env)
    child, _ = spawn(env, "chat", "--new", "--cfg", str(persona), "-a", "LICENSE")
    child.expect("jp>")
    child.send("read it\r")
    child.expect("arr")
    child.expect("jp>")
    child.send("and now?\r")
    child.expect("arr again")
    child.expect("jp>")
    child.sendeof()
    assert finish(child) == 0
    lines = (tmp_path / "requests.jsonl").read_text().splitlines()
    first, second = (json.loads(line) for line in lines)
    assert first["system"].startswith("You are a pirate.")
    assert second["system"].startswith("You are a pirate.")
    assert first["messages"][-1]["content"].startswith('read it\n\n<attachment source="LICENSE">')
    assert second["messages"][-1]["content"] == "and now?"
