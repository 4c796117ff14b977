"""Organising conversations as JP users do (issue 37 items 5 and 6), through the real
`jp` and `jpd --listen` with the recording `test` provider: labels, titles, archive,
pin, `ls` options, fork, grep, `--no-persist` and `--tmp`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.e2e.sockets import Daemons, persisted
from tests.e2e.test_jp_daily import jp_in
from tests.e2e.test_jp_from_jp import recorded, recording_env


def listing(env: Mapping[str, str], cwd: Path, *options: str) -> list[dict[str, Any]]:
    result = jp_in(env, cwd, "conversation", "ls", "-F", "json", *options)
    assert result.returncode == 0, result.stderr
    conversations: list[dict[str, Any]] = json.loads(result.stdout)["conversations"]
    return conversations


async def test_labels_titles_archive_pin_and_ls_options(tmp_path: Path, daemons: Daemons) -> None:
    env = recording_env(tmp_path)
    await daemons.start(env)
    ran = jp_in(env, tmp_path, "query", "--new", "-l", "work", "--title", "Release  plan", "alpha")
    assert ran.returncode == 0, ran.stderr
    assert jp_in(env, tmp_path, "query", "--new", "beta").returncode == 0
    assert jp_in(env, tmp_path, "query", "--new", "gamma").returncode == 0
    by_title = {c["title"]: c["conversationId"] for c in listing(env, tmp_path)}
    assert set(by_title) == {"Release plan", "beta", "gamma"}
    release, beta, gamma = by_title["Release plan"], by_title["beta"], by_title["gamma"]
    assert listing(env, tmp_path, "--label", "work")[0]["labels"] == ["work"]

    added = jp_in(env, tmp_path, "conversation", "label", "add", "urgent", "work", "-c", beta)
    assert added.returncode == 0, added.stderr
    assert "[labels: urgent, work]" in added.stdout
    jp_in(env, tmp_path, "conversation", "label", "rm", "urgent", "-c", beta)
    assert [
        c["conversationId"]
        for c in listing(env, tmp_path, "-l", "work", "--sort", "created", "--no-descending")
    ] == [release, beta]
    bad = jp_in(env, tmp_path, "conversation", "label", "add", "two words", "-c", beta)
    assert bad.returncode == 1 and "invalid label" in bad.stderr

    titled = jp_in(env, tmp_path, "conversation", "title", gamma, "Zebra", "notes")
    assert titled.returncode == 0, titled.stderr
    assert [c["title"] for c in listing(env, tmp_path, "--sort", "title")] == [
        "beta",
        "Release plan",
        "Zebra notes",
    ]
    assert len(listing(env, tmp_path, "--limit", "2")) == 2

    assert jp_in(env, tmp_path, "conversation", "archive", beta).returncode == 0
    assert beta not in [c["conversationId"] for c in listing(env, tmp_path)]
    assert [c["conversationId"] for c in listing(env, tmp_path, "--archived")] == [beta]
    shown = jp_in(env, tmp_path, "conversation", "ls", "--all").stdout
    assert "[archived]" in shown and "#work" in shown
    assert jp_in(env, tmp_path, "conversation", "unarchive", beta[:-2]).returncode == 0
    assert beta in [c["conversationId"] for c in listing(env, tmp_path)]

    assert jp_in(env, tmp_path, "conversation", "pin", release).returncode == 0
    ordered = listing(env, tmp_path)
    assert ordered[0]["conversationId"] == release and ordered[0]["pinned"] is True
    # A pinned conversation leads whatever the order.
    assert listing(env, tmp_path, "--sort", "title", "--descending")[0]["conversationId"] == release


async def test_fork_copies_turns_and_query_fork_continues_in_the_copy(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = recording_env(tmp_path)
    await daemons.start(env)
    for message in ("one", "two", "three"):
        assert jp_in(env, tmp_path, "query", message).returncode == 0
    [source] = [c["conversationId"] for c in listing(env, tmp_path)]
    forked = jp_in(env, tmp_path, "conversation", "fork", "--last", "1", "-l", "copy")
    assert forked.returncode == 0, forked.stderr
    fork_id = forked.stdout.split()[0]
    assert "1 turns" in forked.stdout and fork_id != source
    copied = [e["content"] for e in persisted(env, fork_id) if e["type"] == "chat_request"]
    assert copied == ["three"]
    # The fork became this workspace's conversation, with the history it carries.
    assert jp_in(env, tmp_path, "query", "four").returncode == 0
    last = recorded(tmp_path)[-1]
    assert [m.get("content") for m in last["messages"] if m.get("role") == "user"] == [
        "three",
        "four",
    ]
    assert [e["content"] for e in persisted(env, source) if e["type"] == "chat_request"] == [
        "one",
        "two",
        "three",
    ]

    ran = jp_in(env, tmp_path, "query", "--conversation", source, "--fork", "five")
    assert ran.returncode == 0, ran.stderr
    newest = recorded(tmp_path)[-1]
    users = [m.get("content") for m in newest["messages"] if m.get("role") == "user"]
    assert users == ["one", "two", "three", "five"]
    assert len(listing(env, tmp_path)) == 3
    assert "copy" in [label for c in listing(env, tmp_path) for label in c["labels"]]
    missing = jp_in(env, tmp_path, "conversation", "fork", "c-nope")
    assert missing.returncode == 1 and "not found" in missing.stderr


async def test_grep_finds_lines_with_context(tmp_path: Path, daemons: Daemons) -> None:
    env = recording_env(tmp_path)
    await daemons.start(env)
    jp_in(env, tmp_path, "query", "--new", "first line\nthe Needle here\nlast line")
    jp_in(env, tmp_path, "query", "--new", "nothing to see")
    found = jp_in(env, tmp_path, "conversation", "grep", "needle", "-C", "1")
    assert found.returncode == 0, found.stderr
    lines = found.stdout.splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        "first line",
        "the Needle here",
        "last line",
    ]
    assert lines[1].split(":")[2] == "user"
    assert jp_in(env, tmp_path, "conversation", "grep", "-s", "needle").returncode == 1  # case
    bad = jp_in(env, tmp_path, "conversation", "grep", "(")
    assert bad.returncode == 1 and "invalid pattern" in bad.stderr
    as_json = jp_in(env, tmp_path, "conversation", "grep", "see", "-F", "json")
    [match] = json.loads(as_json.stdout)["matches"]
    assert match["line"] == "nothing to see" and match["event"] == 1


async def test_no_persist_and_tmp(tmp_path: Path, daemons: Daemons) -> None:
    env = recording_env(tmp_path)
    await daemons.start(env)
    gone = jp_in(env, tmp_path, "query", "--no-persist", "forget me")
    assert gone.returncode == 0, gone.stderr
    assert "ok" in gone.stdout
    assert listing(env, tmp_path, "--all") == []
    conversations = Path(env["JP_DATA_DIR"]) / "conversations"
    assert list(conversations.iterdir()) == []
    assert recorded(tmp_path)[-1]["messages"][-1]["content"] == "forget me"

    usage = jp_in(env, tmp_path, "query", "--tmp", "10m", "hi")
    assert usage.returncode == 2 and "--tmp needs --new" in usage.stderr
    ran = jp_in(env, tmp_path, "query", "--new", "--tmp", "what", "is", "x")  # bare --tmp
    assert ran.returncode == 0, ran.stderr
    [kept] = listing(env, tmp_path)
    assert kept["title"] == "what is x" and "expiresAt" in kept
    assert jp_in(env, tmp_path, "query", "--new", "--tmp", "0s", "brief").returncode == 0
    assert [c["title"] for c in listing(env, tmp_path)] == ["what is x"]  # expired: deleted


async def test_a_model_titles_a_new_conversation_unless_the_user_did(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = recording_env(
        tmp_path, '[conversation.title.generate]\nmodel = "test/titler"\n', replies=0
    )
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "responses": [
                    {"text": "Use sorted()."},
                    {"text": '"Sorting lists in Python."'},
                    {"text": "Done."},
                    {"text": "second answer"},
                ]
            }
        )
    )
    await daemons.start(env)
    assert jp_in(env, tmp_path, "query", "--new", "how do I sort a list?").returncode == 0
    await wait_title(env, tmp_path, "Sorting lists in Python")
    title_request = recorded(tmp_path)[1]
    assert title_request["model"] == "titler"
    exchange = "User: how do I sort a list?\n\nAssistant: Use sorted()."
    assert title_request["messages"] == [{"role": "user", "content": exchange}]
    # A title the user gives is kept: no title request is made.
    assert jp_in(env, tmp_path, "query", "--new", "--title", "Mine", "x").returncode == 0
    assert jp_in(env, tmp_path, "query", "y").returncode == 0  # not a new conversation
    assert [r["model"] for r in recorded(tmp_path)] == [
        "scripted",
        "titler",
        "scripted",
        "scripted",
    ]
    titles = sorted(c["title"] for c in listing(env, tmp_path))
    assert titles == ["Mine", "Sorting lists in Python"]


async def wait_title(env: Mapping[str, str], cwd: Path, title: str) -> None:
    from tests.e2e.sockets import wait_for

    await wait_for(lambda: title in [c["title"] for c in listing(env, cwd)], f"the title {title!r}")
