"""Interop with a real OpenAI-compatible server: llama-cpp-python's own
`llama_cpp.server` serving the embedded SmolLM2 GGUF, driven through `jpd` as the
`openai-compatible` provider (protocol.md section 10.4; config reference
`providers.openai_compatible`). A plain turn, a tool call round trip (the follow-up
request carries the assistant's tool call, which that server refuses with `content:
null`), and a question the assistant answers through `answer_inquiry`.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from jpd.llm.model_files import find_default_model
from tests.e2e.conftest import StartJpd
from tests.e2e.test_tools import results
from tests.e2e.test_turns import disk_events
from tests.e2e.tools import make_tool, tool_toml

pytest.importorskip("llama_cpp.server")

MODEL = "openai-compatible/smollm2"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A `llama_cpp.server` process on a free port; yields its `/v1` base URL.

    With the model's own chat template (no `--chat_format`), as it is run by default:
    a named `tool_choice` gets a tool call constrained to the tool's schema, `auto`
    plain text (its `chatml-function-calling` format refuses `auto` when streaming).
    """
    port = _free_port()
    log = (tmp_path_factory.mktemp("llama") / "server.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(find_default_model()),
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--seed", "1"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("llama_cpp.server did not start")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()


def config(base: str, max_tokens: int = 32) -> str:
    return (
        f'[providers.openai_compatible]\nbase_url = "{base}"\n'
        f"[assistant.model.parameters]\nmax_tokens = {max_tokens}\n"
    )


async def test_plain_turn(jpd_factory: StartJpd, home: Path, llama_server: str) -> None:
    daemon = await jpd_factory(model=MODEL, config=config(llama_server))
    await daemon.initialize()
    _, events = await daemon.run_turn("What is the capital of France?")
    end = events[-1]["event"]
    assert end["stopReason"] in ("end_turn", "max_tokens"), end
    text = "".join(e["event"]["text"] for e in events if e["event"]["kind"] == "text_delta")
    assert text.strip()


async def test_tool_call_round_trip(jpd_factory: StartJpd, home: Path, llama_server: str) -> None:
    command = make_tool(
        home,
        "weather",
        'print(json.dumps({"type": "success", "content": "Sunny in " + args["city"]}))\n',
    )
    daemon = await jpd_factory(
        model=MODEL,
        config='[assistant]\ntool_choice = "weather"\n'
        + config(llama_server)
        + tool_toml("weather", command, run='"unattended"', summary='"Weather for a city."')
        + 'parameters.city = { type = "string", required = true, description = "City name" }\n',
    )
    await daemon.initialize()
    started, events = await daemon.run_turn("What is the weather in Paris?")
    end = events[-1]["event"]
    # The follow-up request (carrying the tool call) must be accepted: no HTTP 500.
    assert end["stopReason"] in ("end_turn", "max_tokens"), end
    [call] = [e["event"] for e in events if e["event"]["kind"] == "tool_call"][:1]
    assert call["name"] == "weather"
    [result] = results(daemon, started["turnId"])[:1]
    assert not result["isError"] and result["content"].startswith("Sunny in ")
    types = [e["type"] for e in disk_events(home, started["conversationId"])]
    assert types.index("tool_call_response") < len(types) - 1
    assert "chat_response" in types[types.index("tool_call_response") :]


async def test_assistant_answers_a_question_through_answer_inquiry(
    jpd_factory: StartJpd, home: Path, llama_server: str
) -> None:
    body = """
if "go" not in answers:
    print(json.dumps({"type": "needs_input", "question": {"id": "go",
        "text": "Is 2 greater than 1? Answer true or false.", "answer_type": {"type": "boolean"}}}))
else:
    print("answer=" + json.dumps(answers["go"]))
"""
    command = make_tool(home, "check", body)
    daemon = await jpd_factory(
        model=MODEL,
        # Room for the whole inquiry id in the tool call's arguments.
        config='[assistant]\ntool_choice = "check"\n'
        + config(llama_server, max_tokens=128)
        + tool_toml("check", command, run='"unattended"', summary='"Check a fact."')
        + 'questions.go.target = "assistant"\n',
    )
    await daemon.initialize()
    started, events = await daemon.run_turn("Run the check tool.")
    assert events[-1]["event"]["stopReason"] in ("end_turn", "max_tokens"), events[-1]
    [result] = results(daemon, started["turnId"])[:1]
    content = result["content"].strip()
    assert content in ("answer=true", "answer=false"), content
    response = next(
        e for e in disk_events(home, started["conversationId"]) if e["type"] == "inquiry_response"
    )
    assert response["outcome"] == "answered" and isinstance(response["answer"], bool)
    assert json.loads(content.split("=", 1)[1]) is response["answer"]
