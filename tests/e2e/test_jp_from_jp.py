"""What a JP user expects of `jp` (issue 37), through the real `jp` and `jpd --listen`
against the recording `test` provider: JP config files load, a conversation keeps its
model and config, and `AGENTS.md` reaches the system prompt."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.e2e.sockets import Daemons, persisted, socket_env
from tests.e2e.test_jp_daily import jp_in, started_ids


def recording_env(
    home: Path, toml: str = "", replies: int = 20, model: str | None = "test/scripted"
) -> dict[str, str]:
    """A daemon environment whose config is `toml` (the scripted model, recording every
    request to `home/record.jsonl`) and whose user config is JP's spelling of it."""
    env = socket_env(home, [{"text": "ok"}] * replies)
    script = home / "script.json"
    Path(env["JP_CONFIG"]).write_text(
        f'[providers.test]\nscript = "{script}"\nrecord = "{home / "record.jsonl"}"\n'
        + (f'[assistant.model]\nid = "{model}"\n' if model else "")
        + f"[daemon]\nidle_timeout = 0\n{toml}"
    )
    return env


def recorded(home: Path) -> list[dict[str, Any]]:
    path = home / "record.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def turn_starts(env: Mapping[str, str], conversation_id: str) -> list[dict[str, Any]]:
    return [e for e in persisted(env, conversation_id) if e["type"] == "turn_start"]


JP_FILE = """
[assistant]
name = "Jean-Pierre"
system_prompt = "You are JP."

[assistant.model]
id = { provider = "test", name = "scripted" }
parameters = { top_p = 0.9, reasoning = "low" }

[[assistant.instructions]]
title = "Style"
items = ["Be brief."]
examples = [{ good = "ok", bad = "Certainly! Here is..." }]

[providers.mcp.files]
type = "stdio"
command = "mcp-files"
arguments = ["--root", "."]
variables = ["MODE=ro", "HOME"]
startup_timeout_secs = 5

[providers.llm.anthropic]
api_key_env = "MY_ANTHROPIC"
beta_headers = ["x"]

[providers.llm.aliases]
quick = { provider = "test", name = "quick" }

[style.code]
color = true

[conversation.tools.'*']
run = "edit"
"""


async def test_a_jp_config_file_loads_with_warnings_naming_what_is_ignored(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = recording_env(tmp_path, JP_FILE, model=None)
    await daemons.start(env)
    shown = jp_in(env, tmp_path, "config", "show", "-F", "json")
    assert shown.returncode == 0, shown.stderr
    entries = {e["key"]: e.get("value") for e in json.loads(shown.stdout)["entries"]}
    assert entries["assistant.model.id"] == "test/scripted"
    assert entries["mcp.servers.files.command"] == ["mcp-files", "--root", "."]
    assert entries["mcp.servers.files.env.MODE"] == "<redacted>"
    assert entries["mcp.servers.files.startup_timeout"] == 5.0
    assert entries["providers.anthropic.api_key_env"] == "MY_ANTHROPIC"
    assert entries["aliases.quick"] == "test/quick"
    assert entries["assistant.reasoning.effort"] == "low"
    assert entries["conversation.tools.'*'.run"] == "ask"  # JP's "edit" never runs unasked
    for named in (
        "assistant.name",
        "style",
        "assistant.model.parameters.top_p",
        "providers.llm.anthropic.beta_headers",
        "providers.mcp.files.variables: HOME not passed",
        "conversation.tools.*.run: 'edit' read as 'ask'",
    ):
        assert named in shown.stderr, named
    assert shown.stderr.count("jp: warning:") == 6

    # The file is used for turns, instructions included; `jp query` says once, in one
    # line, that it holds JP settings read otherwise.
    ran = jp_in(env, tmp_path, "query", "--new", "hi")
    assert ran.returncode == 0, ran.stderr
    [warning] = [line for line in ran.stderr.splitlines() if "warning" in line]
    assert warning == (
        f"jp: warning: {env['JP_CONFIG']}: 6 JP settings read differently or ignored "
        "(providers.mcp.files.variables, providers.llm.anthropic.beta_headers, "
        "conversation.tools.*.run, style and 2 more); `jp config show` says how"
    )
    again = jp_in(env, tmp_path, "query", "again")
    assert again.returncode == 0 and "warning" not in again.stderr
    config = Path(env["JP_CONFIG"])
    config.write_text(config.read_text().replace("top_p = 0.9,", "top_p = 0.9, top_k = 5,"))
    changed = jp_in(env, tmp_path, "query", "and again")
    assert "7 JP settings" in changed.stderr
    request = recorded(tmp_path)[0]
    assert request["model"] == "scripted"
    assert request["system"].startswith("You are JP.\n\n<instruction>\n# Style\n\n- Be brief.")
    assert "Good: ok\nBad: Certainly! Here is..." in request["system"]


async def test_a_key_neither_jp_nor_jpd_knows_is_still_an_error(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = recording_env(tmp_path, '[assistant]\nsystem_promt = "typo"\n')
    await daemons.start(env)
    shown = jp_in(env, tmp_path, "config", "show")
    assert shown.returncode == 1
    assert "assistant.system_promt" in shown.stderr


async def test_a_conversation_keeps_its_model_and_config(tmp_path: Path, daemons: Daemons) -> None:
    env = recording_env(tmp_path, model="test/default")
    await daemons.start(env)
    first = jp_in(env, tmp_path, "query", "--new", "-m", "test/chosen", "-s", "Be terse.", "one")
    assert first.returncode == 0, first.stderr
    again = jp_in(env, tmp_path, "query", "two")  # no -m, no -s: the conversation's own
    assert again.returncode == 0, again.stderr
    temp = jp_in(env, tmp_path, "query", "-c", "assistant.model.parameters.temperature=0.5", "3")
    assert temp.returncode == 0, temp.stderr
    other = jp_in(env, tmp_path, "query", "--new", "four")  # a new one: the defaults
    assert other.returncode == 0, other.stderr
    requests = recorded(tmp_path)
    assert [r["model"] for r in requests] == ["chosen", "chosen", "chosen", "default"]
    assert [r["system"] for r in requests] == ["Be terse."] * 3 + [None]
    assert [r["temperature"] for r in requests] == [None, None, 0.5, None]

    [conversation] = [
        line.split()[0].lstrip("*")
        for line in jp_in(env, tmp_path, "conversation", "ls").stdout.splitlines()[1:]
        if "one" in line
    ]
    starts = turn_starts(env, conversation)
    assert [s["model"] for s in starts] == ["test/chosen"] * 3
    assert starts[-1]["config"]["assistant"]["model"]["parameters"]["temperature"] == 0.5
    shown = jp_in(env, tmp_path, "conversation", "show", conversation)
    assert shown.returncode == 0, shown.stderr
    assert "model: test/chosen" in shown.stdout
    assert '"system_prompt": "Be terse."' in shown.stdout

    # A tool permission given with -c is for its turn only.
    jp_in(env, tmp_path, "query", "-c", "conversation.tools.*.run=unattended", "five")
    assert "conversation" not in (turn_starts(env, conversation)[-1]["config"] or {})


async def test_agents_md_from_the_root_down_to_the_working_folder(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = recording_env(tmp_path, "[assistant]\nsystem_prompt = 'Base.'\n")
    await daemons.start(env)
    repo = tmp_path / "repo"
    deep = repo / "pkg" / "mod"
    deep.mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / "AGENTS.md").write_text("Run the tests with make test.\n")
    (repo / "pkg" / "AGENTS.md").write_text("pkg: keep the API stable.\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-KEY-123")
    os.symlink(secret, deep / "AGENTS.md")  # a hostile repository's link out
    (tmp_path / "AGENTS.md").write_text("outside the workspace\n")

    ran = jp_in(env, deep, "query", "--new", "hi")
    assert ran.returncode == 0, ran.stderr
    [request] = recorded(tmp_path)
    system = request["system"]
    assert system.startswith("Base.\n\n")
    root = system.index('<project_instructions file="AGENTS.md">\nRun the tests')
    nearer = system.index('<project_instructions file="pkg/AGENTS.md">\npkg: keep')
    assert root < nearer
    assert "SECRET-KEY-123" not in system and "outside the workspace" not in system
    conversation, _ = started_ids(jp_in(env, deep, "query", "--detach", "again"))
    assert turn_starts(env, conversation)[0]["instructions"] == ["AGENTS.md", "pkg/AGENTS.md"]

    # An AGENTS.md never changes a setting; `agents_files = []` turns them off.
    off = jp_in(env, repo, "query", "--new", "-c", "assistant.agents_files=[]", "x")
    assert off.returncode == 0, off.stderr
    assert "project_instructions" not in (recorded(tmp_path)[-1]["system"] or "")


SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}


async def test_schema_answers_are_json_valid_against_it(tmp_path: Path, daemons: Daemons) -> None:
    env = recording_env(tmp_path, replies=0)
    (tmp_path / "script.json").write_text(
        json.dumps(
            {
                "responses": [
                    {"text": '```json\n{"name": "Ada", "age": 36}\n```'},
                    {"text": '{"name": "Ada", "age": "old"}'},
                    {"text": "Sure! Ada is 36."},
                ]
            }
        )
    )
    schema_file = tmp_path / "person.json"
    schema_file.write_text(json.dumps(SCHEMA))
    await daemons.start(env)
    good = jp_in(env, tmp_path, "query", "--new", "--schema", str(schema_file), "who?")
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout) == {"name": "Ada", "age": 36}
    [request] = recorded(tmp_path)
    assert request["response_schema"] == SCHEMA
    assert request["tools"] == [] and "valid against this JSON schema" in request["system"]

    wrong = jp_in(env, tmp_path, "query", "--new", "--schema", json.dumps(SCHEMA), "who?")
    assert wrong.returncode == 1 and wrong.stdout == ""
    assert "not valid against the schema: age: 'old' is not of type 'integer'" in wrong.stderr
    prose = jp_in(env, tmp_path, "query", "--new", "--schema", str(schema_file), "who?")
    assert prose.returncode == 1 and prose.stdout == "" and "not JSON" in prose.stderr

    bad = jp_in(env, tmp_path, "query", "--new", "--schema", '{"type": 12}', "who?")
    assert bad.returncode == 1 and "not a valid JSON schema" in bad.stderr
    neither = jp_in(env, tmp_path, "query", "--schema", "nofile.json", "x")
    assert neither.returncode == 2 and "neither a file nor JSON" in neither.stderr
    assert len(recorded(tmp_path)) == 3  # the refused ones reached no model
