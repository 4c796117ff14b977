"""Hosted providers end to end: a real `jpd` talking HTTP to a fake API server.

Nothing in the daemon is mocked: streamed answers, usage and cache figures,
retries, errors, API keys (never leaked) and `jp query`, from the HTTP bytes of
the fake server (see tests/e2e/hosted.py) to `turn/event`s and the event log.
Tool calls and reasoning are in test_hosted_tools.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from tests.e2e.conftest import StartJpd
from tests.e2e.hosted import (
    CLAUDE,
    ECHO,
    ECHO_PARAMS,
    KEY,
    OPENAI_CHAT,
    OPENAI_KEY,
    answers,
    anthropic_env,
    assert_no_secret,
    body,
    of_kind,
    plain,
    texts,
)
from tests.e2e.sockets import Daemons, run_jp_async, socket_env
from tests.e2e.test_turns import disk_events, kinds
from tests.e2e.tools import make_tool, tool_toml
from tests.fixtures.fake_llm_server import (
    FakeLLMServer,
    Hang,
    Pause,
    Reply,
    Reset,
    Send,
)
from tests.fixtures.llm_wire import (
    a_block_start,
    a_block_stop,
    a_error,
    a_error_body,
    a_message_delta,
    a_message_start,
    a_message_stop,
    a_text,
    a_text_answer,
    json_reply,
    o_text_answer,
    o_usage,
    stream_reply,
)


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


# --- streaming, usage, persistence ----------------------------------------------------


async def test_anthropic_answer_streams_as_deltas_and_is_persisted_with_usage(
    jpd_factory: StartJpd, home: Path, fake: FakeLLMServer
) -> None:
    fake.push(
        stream_reply(
            a_message_start(input_tokens=21, cache_read=1800, cache_creation=120),
            a_block_start(0, {"type": "text", "text": ""}),
            a_text(0, "Paris is "),
            a_text(0, "the capital "),
            a_text(0, "of France."),
            a_block_stop(0),
            a_message_delta("end_turn", 9),
            a_message_stop(),
        )
    )
    daemon = await jpd_factory(model=CLAUDE, env=anthropic_env(fake))
    await daemon.initialize()
    started, events = await daemon.run_turn("Capital of France?")

    assert kinds(events)[0] == "turn_started" and kinds(events)[-1] == "turn_completed"
    assert events[-1]["event"]["stopReason"] == "end_turn"
    # The first delta goes out at once; later ones within a tick are merged (7.2).
    assert texts(events)[0] == "Paris is "
    assert "".join(texts(events)) == "Paris is the capital of France."
    [usage] = of_kind(events, "usage")
    figures = {"inputTokens": 21, "outputTokens": 9, "cacheReadTokens": 1800}
    assert usage["usage"] == {**figures, "cacheCreationTokens": 120}

    [answer] = answers(home, started["conversationId"])
    assert answer["message"] == "Paris is the capital of France."
    assert answer["usage"] == {
        "input_tokens": 21,
        "output_tokens": 9,
        "cache_read_tokens": 1800,
        "cache_creation_tokens": 120,
    }

    [request] = fake.requests
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    sent = body(request)
    assert sent["model"] == "claude-x" and sent["stream"] is True
    assert sent["messages"][-1]["role"] == "user"
    assert sent["messages"][-1]["content"][0]["text"] == "Capital of France?"


async def test_same_conversation_gives_byte_identical_anthropic_requests(
    jpd_factory: StartJpd, home: Path, fake: FakeLLMServer
) -> None:
    # Two fresh conversations with the same message, tools and config: the bodies
    # must be equal byte for byte, or prompt caching silently misses.
    fake.push(*(stream_reply(*a_text_answer("ok")) for _ in range(3)))
    command = make_tool(home, "echo", ECHO)
    config = (
        '[assistant]\nsystem_prompt = "Be brief."\n'
        + tool_toml("echo", command, run='"unattended"')
        + ECHO_PARAMS
    )
    daemon = await jpd_factory(model=CLAUDE, env=anthropic_env(fake), config=config)
    await daemon.initialize()
    first, _ = await daemon.run_turn("same words")
    await daemon.run_turn("same words")
    assert fake.requests[0].body == fake.requests[1].body
    sent = body(fake.requests[0])
    assert sent["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" in sent["tools"][-1]

    # A follow-up in the first conversation keeps the earlier exchange as its prefix.
    await daemon.run_turn("next", conversationId=first["conversationId"])
    follow_up = body(fake.requests[2])
    assert [m["role"] for m in follow_up["messages"]] == ["user", "assistant", "user"]
    assert plain(follow_up["messages"][1]["content"]) == [{"type": "text", "text": "ok"}]


async def test_openai_answer_with_cached_usage(
    jpd_factory: StartJpd, home: Path, fake: FakeLLMServer
) -> None:
    fake.push(stream_reply(*o_text_answer("Hello", " there", usage=o_usage(300, 2, cached=256))))
    daemon = await jpd_factory(
        model="openai/gpt-x",
        env={"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": f"{fake.base_url}/v1"},
        config=OPENAI_CHAT,
    )
    await daemon.initialize()
    started, events = await daemon.run_turn("hi")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    assert texts(events)[0] == "Hello" and "".join(texts(events)) == "Hello there"
    # input_tokens counts only the uncached part, as Anthropic's figures do.
    [usage] = of_kind(events, "usage")
    assert usage["usage"] == {"inputTokens": 44, "outputTokens": 2, "cacheReadTokens": 256}
    [answer] = answers(home, started["conversationId"])
    assert answer["message"] == "Hello there"
    assert answer["usage"] == {"input_tokens": 44, "output_tokens": 2, "cache_read_tokens": 256}

    [request] = fake.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert body(request)["model"] == "gpt-x"
    assert body(request)["stream_options"] == {"include_usage": True}
    assert_no_secret(OPENAI_KEY, daemon, home)


async def test_openai_compatible_server_by_config_base_url_without_key(
    jpd_factory: StartJpd, home: Path, fake: FakeLLMServer
) -> None:
    fake.push(stream_reply(*o_text_answer("local ", "answer")))
    daemon = await jpd_factory(
        model="openai-compatible/qwen2.5:7b",
        config=f'[providers.openai_compatible]\nbase_url = "{fake.base_url}/v1"\n',
    )
    await daemon.initialize()
    started, events = await daemon.run_turn("hi")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    assert "".join(texts(events)) == "local answer"
    [request] = fake.requests
    assert request.path == "/v1/chat/completions"
    assert "authorization" not in request.headers
    assert body(request)["model"] == "qwen2.5:7b"
    [answer] = answers(home, started["conversationId"])
    assert answer["message"] == "local answer"


async def test_config_base_url_wins_over_environment(
    jpd_factory: StartJpd, fake: FakeLLMServer
) -> None:
    fake.push(stream_reply(*a_text_answer("from config")))
    daemon = await jpd_factory(
        model=CLAUDE,
        env=anthropic_env(fake, ANTHROPIC_BASE_URL="http://127.0.0.1:9"),
        config=f'[providers.anthropic]\nbase_url = "{fake.base_url}"\n',
    )
    await daemon.initialize()
    _, events = await daemon.run_turn("hi")
    assert "".join(texts(events)) == "from config"


# --- retries and errors ------------------------------------------------------------------


async def test_rate_limit_is_retried_visibly_then_the_turn_ends_normally(
    jpd_factory: StartJpd, home: Path, fake: FakeLLMServer
) -> None:
    fake.push(
        json_reply(429, a_error_body("rate_limit_error", "slow down"), {"retry-after": "0"}),
        stream_reply(*a_text_answer("after ", "waiting")),
    )
    daemon = await jpd_factory(model=CLAUDE, env=anthropic_env(fake))
    await daemon.initialize()
    started, events = await daemon.run_turn("hi")
    assert of_kind(events, "retry") == [
        {"kind": "retry", "attempt": 1, "delay": 0.0, "reason": "HTTP 429 rate_limit_error"}
    ]
    assert events[-1]["event"] == {"kind": "turn_completed", "stopReason": "end_turn"}
    assert len(fake.requests) == 2 and fake.requests[0].body == fake.requests[1].body
    assert [a["message"] for a in answers(home, started["conversationId"])] == ["after waiting"]


async def test_connection_reset_mid_answer_restarts_the_answer(
    jpd_factory: StartJpd, home: Path, fake: FakeLLMServer
) -> None:
    cut = a_text_answer("half an ", "answer")[:4]  # through the first text delta
    fake.push(
        Reply(headers={"content-type": "text/event-stream"}, body=(*map(Send, cut), Reset())),
        stream_reply(*a_text_answer("whole ", "answer")),
    )
    daemon = await jpd_factory(model=CLAUDE, env=anthropic_env(fake))
    await daemon.initialize()
    started, events = await daemon.run_turn("hi")
    order = kinds(events)
    assert order.index("text_delta") < order.index("retry")  # streamed, then voided
    [retry] = of_kind(events, "retry")
    assert retry["reason"] == "connection lost" and retry["attempt"] == 1
    after = events[order.index("retry") :]
    assert "".join(texts(after)) == "whole answer"
    assert events[-1]["event"]["stopReason"] == "end_turn"
    # The voided partial answer is never persisted.
    assert [a["message"] for a in answers(home, started["conversationId"])] == ["whole answer"]


async def test_retries_run_out_after_max_retries(
    jpd_factory: StartJpd, fake: FakeLLMServer
) -> None:
    overloaded = json_reply(
        529, a_error_body("overloaded_error", "Overloaded"), {"retry-after-ms": "1"}
    )
    fake.push(overloaded, overloaded, overloaded)
    daemon = await jpd_factory(
        model=CLAUDE,
        env=anthropic_env(fake),
        config="[providers.anthropic]\nmax_retries = 2\n",
    )
    await daemon.initialize()
    _, events = await daemon.run_turn("hi")
    assert [r["attempt"] for r in of_kind(events, "retry")] == [1, 2]
    end = events[-1]["event"]
    assert end["stopReason"] == "error"
    assert end["error"].startswith("anthropic: server overloaded (529): Overloaded")
    assert end["error"].endswith("(gave up after 3 attempts)")
    assert len(fake.requests) == 3


async def test_timeout_from_config_is_retried(
    jpd_factory: StartJpd, home: Path, fake: FakeLLMServer
) -> None:
    fake.push(Hang(), stream_reply(*a_text_answer("finally")))
    daemon = await jpd_factory(
        model=CLAUDE,
        env=anthropic_env(fake),
        config="[providers.anthropic]\ntimeout = 0.5\nmax_retries = 1\n",
    )
    await daemon.initialize()
    started, events = await daemon.run_turn("hi")
    [retry] = of_kind(events, "retry")
    assert retry["reason"] == "timeout"
    assert events[-1]["event"]["stopReason"] == "end_turn"
    assert [a["message"] for a in answers(home, started["conversationId"])] == ["finally"]


async def test_cancel_while_waiting_for_the_first_token(
    jpd_factory: StartJpd, home: Path, fake: FakeLLMServer
) -> None:
    slow = a_text_answer("too late")
    fake.push(
        Reply(headers={"content-type": "text/event-stream"}, body=(Pause(60), *map(Send, slow)))
    )
    daemon = await jpd_factory(model=CLAUDE, env=anthropic_env(fake))
    await daemon.initialize()
    started = await daemon.request("turn/start", {"message": "hi"})
    for _ in range(500):
        if fake.requests:
            break
        await asyncio.sleep(0.02)
    assert fake.requests, "the request never reached the server"
    assert (await daemon.request("turn/cancel", {"turnId": started["turnId"]}))["cancelled"]
    done = await daemon.wait_event(started["turnId"], "turn_completed", timeout=20)
    assert done["event"]["stopReason"] == "cancelled"
    assert disk_events(home, started["conversationId"])[-1]["stop_reason"] == "cancelled"
    # The daemon stays usable: the next turn gets a fresh answer.
    fake.push(stream_reply(*a_text_answer("next")))
    _, events = await daemon.run_turn("again", conversationId=started["conversationId"])
    assert "".join(texts(events)) == "next"


async def test_unauthorized_ends_the_turn_with_one_line_naming_the_key_variable(
    jpd_factory: StartJpd, home: Path, fake: FakeLLMServer
) -> None:
    # The server echoes the key back, as some proxies do: it must be masked.
    fake.push(json_reply(401, a_error_body("authentication_error", f"invalid x-api-key {KEY}")))
    daemon = await jpd_factory(model=CLAUDE, env=anthropic_env(fake, JPD_LOG_LEVEL="DEBUG"))
    await daemon.initialize()
    started, events = await daemon.run_turn("hi")
    assert of_kind(events, "retry") == []
    assert len(fake.requests) == 1
    end = events[-1]["event"]
    assert end == {
        "kind": "turn_completed",
        "stopReason": "error",
        "error": "anthropic: authentication failed (401): check the API key in $ANTHROPIC_API_KEY",
    }
    persisted = disk_events(home, started["conversationId"])
    assert persisted[-1]["stop_reason"] == "error" and persisted[-1]["error"] == end["error"]
    assert_no_secret(KEY, daemon, home)


async def test_bad_request_and_mid_stream_errors_are_not_retried_and_mask_the_key(
    jpd_factory: StartJpd, home: Path, fake: FakeLLMServer
) -> None:
    fake.push(
        json_reply(400, a_error_body("invalid_request_error", f"bad field near '{KEY}'\nline 2")),
        stream_reply(
            a_message_start(),
            a_block_start(0, {"type": "text", "text": ""}),
            a_text(0, "partial"),
            a_error("invalid_request_error", f"key {KEY} revoked"),
        ),
    )
    daemon = await jpd_factory(model=CLAUDE, env=anthropic_env(fake, JPD_LOG_LEVEL="DEBUG"))
    await daemon.initialize()
    first, events = await daemon.run_turn("one")
    error = events[-1]["event"]["error"]
    assert error == (
        "anthropic: request rejected (400 invalid_request_error): bad field near '***' line 2"
    )
    _, events = await daemon.run_turn("two", conversationId=first["conversationId"])
    assert events[-1]["event"]["error"] == (
        "anthropic: error mid-stream (invalid_request_error): key *** revoked"
    )
    assert len(fake.requests) == 2
    # What streamed before the failure is kept, like a cancelled turn's partial answer.
    assert [a["message"] for a in answers(home, first["conversationId"])] == ["partial"]
    assert_no_secret(KEY, daemon, home)


@pytest.mark.parametrize(
    ("model", "variable"),
    [(CLAUDE, "ANTHROPIC_API_KEY"), ("openai/gpt-x", "OPENAI_API_KEY")],
)
async def test_missing_key_is_refused_at_turn_start_naming_the_variable(
    jpd_factory: StartJpd, fake: FakeLLMServer, model: str, variable: str
) -> None:
    # An empty value counts as unset (and overrides whatever the test runner has).
    daemon = await jpd_factory(
        model=model,
        env={variable: "  ", "ANTHROPIC_BASE_URL": fake.base_url, "OPENAI_BASE_URL": fake.base_url},
    )
    await daemon.initialize()
    with pytest.raises(JsonRpcException) as raised:
        await daemon.request("turn/start", {"message": "hi"})
    provider = model.split("/")[0]
    assert raised.value.code == -32004
    assert (
        raised.value.message == f"{provider}: no API key; set the {variable} environment variable"
    )
    assert fake.requests == []
    assert (await daemon.request("conversation/list"))["conversations"] == []


async def test_custom_key_variable_is_named_when_missing(
    jpd_factory: StartJpd, fake: FakeLLMServer
) -> None:
    daemon = await jpd_factory(
        model="openai-compatible/m",
        config=f'[providers.openai_compatible]\nbase_url = "{fake.base_url}/v1"\n'
        'api_key_env = "JPD_E2E_UNSET_KEY"\n',
    )
    await daemon.initialize()
    with pytest.raises(JsonRpcException) as raised:
        await daemon.request("turn/start", {"message": "hi"})
    assert raised.value.code == -32004
    assert "set the JPD_E2E_UNSET_KEY environment variable" in raised.value.message


# --- the jp client -------------------------------------------------------------------


@pytest.mark.parametrize("how", [[], ["--stdio"]], ids=["shared", "stdio"])
async def test_jp_query_streams_a_hosted_answer_to_stdout(
    tmp_path: Path, fake: FakeLLMServer, daemons: Daemons, how: list[str]
) -> None:
    fake.push(stream_reply(*a_text_answer("Hello ", "from ", "Claude.")))
    env = socket_env(tmp_path, idle_timeout=30)
    env.update(anthropic_env(fake), JPD_LOG_LEVEL="DEBUG")
    daemons.watch(env)  # the shared daemon `jp` starts is stopped at the end
    done = await run_jp_async(env, *how, "query", "--new", "-m", CLAUDE, "Say hello")
    assert (done.returncode, done.stdout) == (0, "Hello from Claude.\n"), done.stderr
    assert body(fake.requests[0])["model"] == "claude-x"
    logs = [p.read_text(errors="replace") for p in (tmp_path / "logs").rglob("*") if p.is_file()]
    assert logs
    for text in (done.stdout, done.stderr, *logs):
        assert KEY not in text


async def test_jp_query_reports_a_missing_key(
    tmp_path: Path, fake: FakeLLMServer, daemons: Daemons
) -> None:
    env = socket_env(tmp_path, idle_timeout=30)
    env.update(ANTHROPIC_API_KEY="", ANTHROPIC_BASE_URL=fake.base_url)
    daemons.watch(env)
    done = await run_jp_async(env, "--stdio", "query", "--new", "-m", CLAUDE, "hi")
    assert done.returncode == 1
    assert done.stderr == (
        "jp: anthropic: no API key; set the ANTHROPIC_API_KEY environment variable\n"
    )
    assert fake.requests == []
