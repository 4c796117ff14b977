"""Images and PDFs attached with `jp query -a` (a file, a glob, or kept with `jp attachment
add`) and structured answers (`jp query --schema`) through the real `jp` and `jpd
--listen`, against fakes of Anthropic's, OpenAI's Responses, Gemini's and Ollama's wire
formats: each gets the schema and the documents in its own shape, and a model that takes
no PDFs refuses them before anything is sent."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.hosted import KEY, OPENAI_KEY, body
from tests.e2e.sockets import Daemons
from tests.e2e.test_jp_daily import jp_in
from tests.e2e.test_jp_from_jp import SCHEMA, recorded, recording_env
from tests.e2e.test_prompt_images import PNG
from tests.fixtures.fake_llm_server import FakeLLMServer, Reply, Send
from tests.fixtures.llm_wire import a_text_answer, sse, stream_reply

PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
PDF_B64 = base64.b64encode(PDF).decode()
OTHER_PNG = PNG + b"-two"
GEMINI_KEY = "AIza-e2e-SECRET-99cc"


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


def hosted_env(home: Path, fake: FakeLLMServer, model: str) -> dict[str, str]:
    env = recording_env(
        home, f'[providers.google]\nbase_url = "{fake.base_url}/v1beta"\n', model=model
    )
    env.update(
        ANTHROPIC_API_KEY=KEY,
        ANTHROPIC_BASE_URL=fake.base_url,
        OPENAI_API_KEY=OPENAI_KEY,
        OPENAI_BASE_URL=f"{fake.base_url}/v1",
        GEMINI_API_KEY=GEMINI_KEY,
    )
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1"
    return env


def workspace(home: Path) -> Path:
    work = home / "work"
    (work / ".git").mkdir(parents=True)
    (work / "shots").mkdir()
    (work / "shots" / "a.png").write_bytes(PNG)
    (work / "shots" / "b.png").write_bytes(OTHER_PNG)
    (work / "spec.pdf").write_bytes(PDF)
    return work


def anthropic_answer(text: str) -> Reply:
    return stream_reply(*a_text_answer(text))


def responses_answer(text: str) -> Reply:
    usage = {"input_tokens": 3, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 2}

    def event(kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, **fields}, event=kind)

    return stream_reply(
        event("response.output_text.delta", delta=text),
        event("response.completed", response={"status": "completed", "usage": usage}),
    )


def gemini_answer(text: str) -> Reply:
    candidate = {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
    usage = {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5}
    return stream_reply(sse({"candidates": [candidate], "usageMetadata": usage}))


def ollama_answer(text: str) -> Reply:
    def line(**fields: Any) -> Send:
        return Send((json.dumps({"model": "qwen3", **fields}) + "\n").encode())

    return Reply(
        body=(
            line(message={"role": "assistant", "content": text}, done=False),
            line(done=True, done_reason="stop", prompt_eval_count=3, eval_count=2),
        )
    )


async def test_pdfs_and_globbed_images_go_in_each_providers_shape(
    tmp_path: Path, daemons: Daemons, fake: FakeLLMServer
) -> None:
    env = hosted_env(tmp_path, fake, "anthropic/claude-x")
    work = workspace(tmp_path)
    await daemons.start(env)
    fake.push(anthropic_answer("A spec."), responses_answer("A spec."), gemini_answer("A spec."))
    ask = ("-a", "spec.pdf", "-a", "shots/*.png", "read these")
    claude = jp_in(env, work, "query", "--new", *ask)
    assert claude.returncode == 0, claude.stderr
    blocks = body(fake.requests[-1])["messages"][-1]["content"]
    assert [b["type"] for b in blocks] == ["document", "image", "image", "text"]
    assert blocks[0]["source"] == {
        "type": "base64",
        "media_type": "application/pdf",
        "data": PDF_B64,
    }
    assert blocks[-1]["text"] == "read these"  # no text attachment: the message alone

    gpt = jp_in(env, work, "query", "--new", "-m", "openai/gpt-x", *ask)
    assert gpt.returncode == 0, gpt.stderr
    [user] = body(fake.requests[-1])["input"]
    assert [p["type"] for p in user["content"]] == [
        "input_text",
        "input_file",
        "input_image",
        "input_image",
    ]
    assert user["content"][1]["file_data"] == f"data:application/pdf;base64,{PDF_B64}"
    assert user["content"][1]["filename"].endswith(".pdf")

    gemini = jp_in(env, work, "query", "--new", "-m", "google/gemini-x", *ask)
    assert gemini.returncode == 0, gemini.stderr
    parts = body(fake.requests[-1])["contents"][-1]["parts"]
    assert parts[1] == {"inlineData": {"mimeType": "application/pdf", "data": PDF_B64}}
    assert [p["inlineData"]["mimeType"] for p in parts[2:]] == ["image/png", "image/png"]

    sent = len(fake.requests)
    for model in ("ollama/qwen3", "test/scripted"):
        refused = jp_in(env, work, "query", "--new", "-m", model, *ask)
        assert refused.returncode == 1 and f"the model {model} takes no PDFs" in refused.stderr
    pictures_only = jp_in(env, work, "query", "--new", "-m", "test/scripted", "-a", "shots/*", "x")
    assert pictures_only.returncode == 1 and "takes no images" in pictures_only.stderr
    assert len(fake.requests) == sent and recorded(tmp_path) == []


async def test_a_kept_image_goes_once_and_again_when_it_changed(
    tmp_path: Path, daemons: Daemons, fake: FakeLLMServer
) -> None:
    env = hosted_env(tmp_path, fake, "anthropic/claude-x")
    work = workspace(tmp_path)
    await daemons.start(env)
    fake.push(*(anthropic_answer("ok") for _ in range(4)))
    assert jp_in(env, work, "query", "--new", "hi").returncode == 0
    added = jp_in(env, work, "attachment", "add", "shots/a.png")
    assert added.returncode == 0 and added.stdout == "shots/a.png\n"

    def images_per_user_turn() -> list[int]:
        messages = body(fake.requests[-1])["messages"]
        return [
            sum(b["type"] == "image" for b in m["content"]) for m in messages if m["role"] == "user"
        ]

    assert jp_in(env, work, "query", "first").returncode == 0
    assert images_per_user_turn() == [0, 1]
    assert jp_in(env, work, "query", "second").returncode == 0
    assert images_per_user_turn() == [0, 1, 0]  # still in the history: not sent again
    (work / "shots" / "a.png").write_bytes(OTHER_PNG)
    assert jp_in(env, work, "query", "third").returncode == 0
    assert images_per_user_turn() == [0, 1, 0, 1]
    last = body(fake.requests[-1])["messages"][-1]["content"][0]
    assert last["source"]["data"] == base64.b64encode(OTHER_PNG).decode()


STRICT = {**SCHEMA, "additionalProperties": False}


async def test_schema_answers_on_the_responses_api_gemini_and_ollama(
    tmp_path: Path, daemons: Daemons, fake: FakeLLMServer
) -> None:
    env = hosted_env(tmp_path, fake, "openai/gpt-x")
    env_toml = f'[providers.ollama]\nbase_url = "{fake.base_url}"\n'
    Path(env["JP_CONFIG"]).write_text(Path(env["JP_CONFIG"]).read_text() + env_toml)
    await daemons.start(env)
    answer = '{"name": "Ada", "age": 36}'
    fake.push(responses_answer(answer), gemini_answer(answer), ollama_answer(answer))
    schema = json.dumps(STRICT)

    gpt = jp_in(env, tmp_path, "query", "--new", "--schema", schema, "who?")
    assert gpt.returncode == 0, gpt.stderr
    assert json.loads(gpt.stdout) == {"name": "Ada", "age": 36}
    sent = body(fake.requests[-1])
    assert sent["text"] == {
        "format": {"type": "json_schema", "name": "response", "schema": STRICT, "strict": True}
    }
    assert "tools" not in sent

    gemini = jp_in(
        env, tmp_path, "query", "--new", "-m", "google/gemini-x", "--schema", schema, "?"
    )
    assert gemini.returncode == 0, gemini.stderr
    assert json.loads(gemini.stdout)["name"] == "Ada"
    config = body(fake.requests[-1])["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == STRICT

    ollama = jp_in(env, tmp_path, "query", "--new", "-m", "ollama/qwen3", "--schema", schema, "?")
    assert ollama.returncode == 0, ollama.stderr
    assert json.loads(ollama.stdout)["age"] == 36
    assert body(fake.requests[-1])["format"] == STRICT


async def test_the_embedded_model_answers_under_the_schemas_grammar(
    tmp_path: Path, daemons: Daemons
) -> None:
    pytest.importorskip("llama_cpp")
    env = recording_env(
        tmp_path, "[assistant.model.parameters]\nmax_tokens = 96\n", model="local/smollm2"
    )
    await daemons.start(env)
    schema = {
        "type": "object",
        "properties": {"capital": {"type": "string", "enum": ["Paris", "Lyon", "Nice"]}},
        "required": ["capital"],
    }
    ran = jp_in(
        env, tmp_path, "query", "--new", "--schema", json.dumps(schema), "Capital of France?"
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["capital"] in ("Paris", "Lyon", "Nice")


async def test_a_pdf_by_url_goes_as_a_document(
    tmp_path: Path, daemons: Daemons, fake: FakeLLMServer
) -> None:
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "application/pdf")
            self.end_headers()
            self.wfile.write(PDF)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/paper.pdf"
    try:
        env = hosted_env(tmp_path, fake, "anthropic/claude-x")
        work = workspace(tmp_path)
        await daemons.start(env)
        fake.push(anthropic_answer("A paper."))
        ran = jp_in(env, work, "query", "--new", "-a", url, "summarise")
        assert ran.returncode == 0, ran.stderr
        blocks = body(fake.requests[-1])["messages"][-1]["content"]
        assert [b["type"] for b in blocks] == ["document", "text"]
        assert blocks[0]["source"]["data"] == PDF_B64
        refused = jp_in(env, work, "query", "--new", "-m", "test/scripted", "-a", url, "x")
        assert refused.returncode == 1 and "takes no PDFs" in refused.stderr
    finally:
        server.shutdown()
        server.server_close()
