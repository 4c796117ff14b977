"""Attachments (issue 37 item 2) through the real `jp` and `jpd --listen` with the
recording `test` provider: files, globs and excludes, URLs, commands, other
conversations, and attachments kept on a conversation; errors before anything is sent."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.e2e.conftest import StartJpd
from tests.e2e.sockets import Daemons
from tests.e2e.test_jp_daily import jp_in
from tests.e2e.test_jp_from_jp import recorded, recording_env, turn_starts

PAGE = (
    b"<html><head><title>t</title><script>evil()</script></head>"
    b"<body><h1>Spec</h1><p>Rule one.</p></body></html>"
)


@contextmanager
def web() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/spec.html":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.end_headers()
            self.wfile.write(PAGE)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def last_user(home: Path) -> str:
    return str(recorded(home)[-1]["messages"][-1]["content"])


async def test_files_globs_urls_and_conversations(tmp_path: Path, daemons: Daemons) -> None:
    env = recording_env(tmp_path)
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1"
    work = tmp_path / "work"
    (work / "src" / "vendor").mkdir(parents=True)
    (work / ".git").mkdir()
    (work / "src" / "a.py").write_text("A = 1\n")
    (work / "src" / "b.py").write_text("B = 2\n")
    (work / "src" / "vendor" / "c.py").write_text("C = 3\n")
    await daemons.start(env)
    ran = jp_in(env, work, "query", "--new", "-a", "src/**/*.py", "-a", "!src/vendor/**", "look")
    assert ran.returncode == 0, ran.stderr
    sent = last_user(tmp_path)
    assert sent.startswith('look\n\n<attachment source="src/a.py">\nA = 1\n</attachment>')
    assert '<attachment source="src/b.py">' in sent and "C = 3" not in sent

    with web() as base:
        fetched = jp_in(env, work, "query", "-a", f"{base}/spec.html", "and this")
        assert fetched.returncode == 0, fetched.stderr
        page = last_user(tmp_path)
        assert "Spec\nRule one." in page and "evil" not in page
        broken = jp_in(env, work, "query", "-a", f"{base}/gone.html", "x")
        assert broken.returncode == 1 and "HTTP 404" in broken.stderr
    missing = jp_in(env, work, "query", "-a", "nope.txt", "x")
    assert missing.returncode == 1 and "attachment nope.txt: no such file" in missing.stderr
    outside = jp_in(env, work, "query", "-a", "../script.json", "x")
    assert outside.returncode == 1 and "leads out of the workspace" in outside.stderr
    count = len(recorded(tmp_path))

    [first] = [
        line.split()[0].lstrip("*")
        for line in jp_in(env, work, "conversation", "ls").stdout.splitlines()[1:]
    ]
    other = jp_in(env, work, "query", "--new", "-a", f"jp://{first}", "summarise it")
    assert other.returncode == 0, other.stderr
    assert len(recorded(tmp_path)) == count + 1
    assert "user: look" in last_user(tmp_path) and "assistant: ok" in last_user(tmp_path)


async def test_kept_attachments_send_their_current_content(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = recording_env(tmp_path)
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    notes = work / "notes.md"
    notes.write_text("version one\n")
    await daemons.start(env)
    assert jp_in(env, work, "query", "--new", "hi").returncode == 0
    refused = jp_in(env, work, "attachment", "add", "notes.md", "missing.md")
    assert refused.returncode == 1 and "attachment missing.md: no such file" in refused.stderr
    added = jp_in(env, work, "attachment", "add", "notes.md")
    assert added.returncode == 0, added.stderr
    assert added.stdout == "notes.md\n"
    assert jp_in(env, work, "query", "first").returncode == 0
    assert '<attachment source="notes.md">\nversion one' in recorded(tmp_path)[-1]["system"]
    notes.write_text("version two\n")
    assert jp_in(env, work, "query", "second").returncode == 0
    assert "version two" in recorded(tmp_path)[-1]["system"]
    assert last_user(tmp_path) == "second"  # not in the message: not kept twice in the log
    assert jp_in(env, work, "attachment", "ls").stdout == "notes.md\n"
    conversation = (
        jp_in(env, work, "conversation", "ls").stdout.splitlines()[1].split()[0].lstrip("*")
    )
    assert turn_starts(env, conversation)[-1]["attachments"] == ["notes.md"]

    notes.unlink()
    gone = jp_in(env, work, "query", "third")
    assert gone.returncode == 1 and "attachment notes.md: no such file" in gone.stderr
    assert jp_in(env, work, "attachment", "rm", "notes.md").stdout == ""
    assert jp_in(env, work, "query", "third").returncode == 0
    assert "attachment" not in (recorded(tmp_path)[-1]["system"] or "")


async def test_command_output_is_sandboxed(tmp_path: Path, daemons: Daemons) -> None:
    env = recording_env(tmp_path)
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    await daemons.start(env)
    ran = jp_in(env, work, "query", "--new", "-a", "cmd://echo hello; touch made || true", "x")
    if "cannot be sandboxed here" in ran.stderr:
        return  # no Landlock on this kernel: refused, never run unconfined
    assert ran.returncode == 0, ran.stderr
    assert '<attachment source="cmd://echo hello; touch made || true">\nhello' in last_user(
        tmp_path
    )
    assert not (work / "made").exists()  # read-only
    failed = jp_in(env, work, "query", "-a", "cmd://exit 3", "x")
    assert failed.returncode == 1 and "exit code 3" in failed.stderr


async def test_an_image_file_goes_as_an_image(tmp_path: Path, daemons: Daemons) -> None:
    from tests.e2e.test_prompt_images import PNG

    env = recording_env(tmp_path)
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    (work / "pic.png").write_bytes(PNG)
    await daemons.start(env)
    refused = jp_in(env, work, "query", "--new", "-a", "pic.png", "what is this?")
    assert refused.returncode == 1 and "takes no images" in refused.stderr
    assert recorded(tmp_path) == []


async def test_anthropic_gets_an_attached_image(jpd_factory: StartJpd, home: Path) -> None:
    from tests.e2e.hosted import CLAUDE, anthropic_env, body
    from tests.e2e.test_prompt_images import B64, PNG
    from tests.fixtures.fake_llm_server import FakeLLMServer
    from tests.fixtures.llm_wire import a_text_answer, stream_reply

    work = home / "work"
    (work / ".git").mkdir(parents=True)
    (work / "pic.png").write_bytes(PNG)
    (work / "notes.txt").write_text("a note\n")
    with FakeLLMServer() as fake:
        fake.push(stream_reply(*a_text_answer("A pixel.")))
        daemon = await jpd_factory(model=CLAUDE, env=anthropic_env(fake))
        await daemon.initialize()
        await daemon.run_turn(
            "what is this?", attachments=["pic.png", "notes.txt"], environment={"cwd": str(work)}
        )
        sent = body(fake.requests[0])["messages"][-1]["content"]
    assert sent[0]["source"]["data"] == B64
    assert sent[-1]["text"].startswith('what is this?\n\n<attachment source="notes.txt">\na note')
