"""What an LLM inquiry costs, measured through a real `jpd` with the scripted provider.

(a) Tokens. A tool whose arguments are ~5,000 tokens (tokens approximated as
    characters / 4) asks the assistant a boolean question. The recorded parent and
    side requests are turned into real Anthropic bodies (`anthropic_request.build_body`)
    and compared: the side request's input that is not a cache hit (what it appends
    after the asking call: paused results + question) against the old pattern, where
    the model re-calls the tool with all its arguments plus the answers (the question
    as a tool result + the re-call); and the prefix-identity ratio, shared prefix bytes
    over the parent's bytes, in cache order (tools, system, messages).
(b) Parallelism. The wall time of a turn whose response makes 8 tool calls that each
    ask the assistant, against a turn with 1 such call, with a fixed fake-provider
    latency (`delay_ms`) on every answer. Serialized inquiries would cost ~8x the delay.

Run: python bench/bench_inquiry.py [--delay-ms 500] [--parallel 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.prompt_cache import (  # noqa: E402
    cache_sequence,
    encode,
    shared,
    uncached,
    uncached_share,
)
from jpd.llm.anthropic_request import build_body  # noqa: E402
from jpd.llm.base import (  # noqa: E402
    AssistantMessage,
    ModelRequest,
    ToolCallPart,
    ToolChoiceTool,
    ToolResultMessage,
    UserMessage,
)
from jpd.llm.request_build import encode_body  # noqa: E402

ARG_CHARS = 20_000  # ~5,000 tokens at 4 characters a token
SYSTEM = "You are a careful coding assistant. " * 20
PRIOR = "Here is some background on the project. " * 50

TOOL = """\
import json, sys
request = json.load(sys.stdin)
answers = request["tool"]["answers"]
if "q" not in answers:
    question = {"id": "q", "text": "Create a backup before changing the file?",
                "answer_type": {"type": "boolean"}}
    print(json.dumps({"type": "needs_input", "question": question}))
else:
    print(json.dumps({"type": "success", "content": "done, backup=" + json.dumps(answers["q"])}))
"""


def tokens(n_bytes: int) -> int:
    return round(n_bytes / 4)


# --- a minimal JSON-RPC client over the daemon's stdio ------------------------------------


class Daemon:
    """One `python -m jpd` on stdio; notifications are read and dropped as they come."""

    def __init__(self, home: Path, config: str) -> None:
        (home / "config.toml").write_text(config)
        env = {
            **os.environ,
            "JP_CONFIG": str(home / "config.toml"),
            "JP_DATA_DIR": str(home / "data"),
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jpd"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        assert self.proc.stdin and self.proc.stdout
        self._out: IO[bytes] = self.proc.stdin
        self._in: IO[bytes] = self.proc.stdout
        self._next = 0
        self.request("initialize", {"protocolVersion": 1, "clientInfo": {"name": "bench"}})
        self._send({"jsonrpc": "2.0", "method": "initialized", "params": {}})

    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        self._out.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self._out.flush()

    def _read(self) -> dict[str, Any]:
        header = b""
        while not header.endswith(b"\r\n\r\n"):
            byte = self._in.read(1)
            if not byte:
                raise RuntimeError("jpd exited")
            header += byte
        length = int(header.split(b"Content-Length:")[1].split(b"\r\n")[0])
        message: dict[str, Any] = json.loads(self._in.read(length))
        return message

    def request(self, method: str, params: Any = None) -> Any:
        self._next += 1
        self._send({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params})
        while True:
            message = self._read()
            if message.get("id") == self._next and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def run_turn(self, message: str, conversation_id: str | None = None) -> tuple[str, float]:
        """Run one turn to its end -> (conversation id, wall seconds)."""
        params: dict[str, Any] = {"message": message}
        if conversation_id:
            params["conversationId"] = conversation_id
        start = time.perf_counter()
        started = self.request("turn/start", params)
        while True:
            note = self._read()
            event = note.get("params", {})
            if (
                note.get("method") == "turn/event"
                and event.get("turnId") == started["turnId"]
                and event["event"]["kind"] == "turn_completed"
            ):
                stop = event["event"]["stopReason"]
                if stop != "end_turn":
                    raise RuntimeError(f"turn ended with {stop}: {event['event'].get('error')}")
                return started["conversationId"], time.perf_counter() - start

    def close(self) -> None:
        self.request("shutdown")
        self._send({"jsonrpc": "2.0", "method": "exit"})
        self.proc.wait(20)


# --- the scripted run ------------------------------------------------------------------


def calls(n: int, name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "tool_calls": [
            {"id": f"{name}_{i}", "name": name, "arguments": arguments} for i in range(n)
        ]
    }


def config_text(home: Path, responses: list[dict[str, Any]]) -> str:
    script = home / "script.json"
    script.write_text(json.dumps({"responses": responses}))
    tool = home / "tool.py"
    tool.write_text(TOOL)
    command = f"{sys.executable} -S {tool}"
    return (
        f"[assistant]\nsystem_prompt = {json.dumps(SYSTEM)}\n"
        '[assistant.model]\nid = "test/scripted"\n'
        f'[providers.test]\nscript = "{script}"\nrecord = "{home / "requests.jsonl"}"\n'
        f"[conversation.tools.big]\ncommand = {json.dumps(command)}\n"
        'run = "unattended"\nquestions.q.target = "assistant"\n'
        'parameters.content = { type = "string", required = true }\n'
        f"[conversation.tools.asker]\ncommand = {json.dumps(command)}\n"
        'run = "unattended"\nquestions.q.target = "assistant"\n'
    )


def run(args: argparse.Namespace, home: Path) -> tuple[list[str], list[float], list[float]]:
    answer = {"answer_inquiry": "true", "delay_ms": args.delay_ms}
    content = ("def change(line): return line.strip(); " * ARG_CHARS)[:ARG_CHARS]
    responses: list[dict[str, Any]] = [
        {"text": "Noted."},  # (a): a prior exchange, then the tool with big arguments
        calls(1, "big", content=content),
        {"answer_inquiry": "true"},
        {"text": "Done."},
    ]
    plan = [1] + [n for _ in range(args.rounds) for n in (1, args.parallel)]  # 1 = warm-up
    for n in plan:
        responses += [calls(n, "asker"), *[answer] * n, {"text": "Done."}]
    daemon = Daemon(home, config_text(home, responses))
    try:
        conversation, _ = daemon.run_turn(PRIOR)
        daemon.run_turn("Refactor the file.", conversation)
        times: dict[int, list[float]] = {1: [], args.parallel: []}
        for index, n in enumerate(plan):
            _, seconds = daemon.run_turn("Change the files.")
            if index:
                times[n].append(seconds)
    finally:
        daemon.close()
    lines = (home / "requests.jsonl").read_text().splitlines()
    return lines, times[1], times[args.parallel]


# --- (a) from the recorded requests ------------------------------------------------------


def pinned_as_before(side: ModelRequest, inquiry_id: str) -> ModelRequest:
    """`side` as sent before RFD 033 was restored: `answer_inquiry` forced and its
    schema pinned (`enum`) to the inquiry's id and a boolean's values."""
    schema = {
        "type": "object",
        "properties": {
            "inquiry_id": {"type": "string", "enum": [inquiry_id]},
            "answer": {"type": "string", "enum": ["true", "false"]},
        },
        "required": ["inquiry_id", "answer"],
        "additionalProperties": False,
    }
    tools = tuple(
        t.model_copy(update={"parameters": schema}) if t.name == "answer_inquiry" else t
        for t in side.tools
    )
    forced = ToolChoiceTool(name="answer_inquiry")
    return side.model_copy(update={"tools": tools, "tool_choice": forced})


def with_messages(parent: ModelRequest, *messages: Any) -> dict[str, Any]:
    """The Anthropic body of `parent` with `messages` appended."""
    return build_body(parent.model_copy(update={"messages": (*parent.messages, *messages)}))


def report_tokens(lines: list[str]) -> None:
    """Print (a) from the recorded prior turn, parent, side request and follow-up."""
    first, parent, side, follow = (ModelRequest.model_validate_json(x) for x in lines[:4])
    question = side.messages[-1]
    asking = side.messages[len(parent.messages)]
    assert isinstance(question, UserMessage) and isinstance(asking, AssistantMessage)
    parent_body, side_body = build_body(parent), build_body(side)

    # The inquiry appends its last user turn (paused result + question) after the call.
    new = sum(len(encode(block)) for block in side_body["messages"][-1]["content"])
    asking_bytes = len(encode(side_body["messages"][-2]["content"]))

    # The old pattern: the question comes back as the tool's result, the model re-calls
    # the tool with all its arguments plus the answers, the result follows.
    call = asking.tool_calls[0]
    again = ToolCallPart(
        id=call.id + "_again",
        name=call.name,
        arguments={**call.arguments, "tool_answers": {"q": True}},
    )
    asked = ToolResultMessage(
        tool_call_id=call.id, content=f"Tool needs input:\n{question.content}"
    )
    old_ask = with_messages(parent, asking, asked)
    old_body = with_messages(
        parent,
        asking,
        asked,
        AssistantMessage(tool_calls=(again,)),
        ToolResultMessage(tool_call_id=again.id, content="done, backup=true"),
    )
    recall = len(encode(old_body["messages"][-2]["content"][0]))
    old = len(encode(old_body["messages"][-3]["content"][0])) + recall

    content = [cache_sequence(b, markers=False) for b in (parent_body, side_body)]
    raw = [cache_sequence(b, markers=True) for b in (parent_body, side_body)]
    same = shared(*content)

    before = [build_body(first), parent_body]
    follow_body = build_body(follow)
    extra = {}
    for turn_before in (False, True):
        base = uncached(before, [follow_body], turn_before=turn_before)
        extra[turn_before] = (
            uncached(before, [side_body, follow_body], turn_before=turn_before) - base,
            uncached(before, [old_ask, old_body], turn_before=turn_before) - base,
        )

    inquiry_id = question.content.split('inquiry_id "')[1].split('"')[0]
    side_miss, side_all = uncached_share(before, side_body)
    pin_miss, pin_all = uncached_share(before, build_body(pinned_as_before(side, inquiry_id)))

    args_chars = len(json.dumps(call.arguments))
    print(f"(a) tool arguments: {args_chars:,} chars (~{args_chars // 4:,} tokens)")
    print(f"    inquiry appends: paused result + question = {new:,} B (~{tokens(new):,} tokens)")
    print(
        f"    old pattern: question result + re-call (arguments + answers) = {old:,} B "
        f"(~{tokens(old):,} tokens)"
    )
    print(f"    ratio inquiry/old = {new / old:.3f} (old pattern {old / new:.1f}x)")
    print(
        f"    prefix identity: {same:,} / {len(content[0]):,} B of the parent's tools, system "
        f"and messages = {same / len(content[0]):.3f} (whole parent body "
        f"{len(encode_body(parent_body)):,} B)"
    )
    print(
        f"      counting cache_control markers: {shared(*raw) / len(raw[0]):.3f} (the builder "
        "moves message breakpoints to the newest turns; markers are not cached content)"
    )
    print(
        "    modelled Anthropic prompt cache: input not read from cache, added over the same "
        "turn without a question (inquiry vs old pattern):"
    )
    for turn_before, label in (
        (False, "builder's breakpoints"),
        (True, "2nd message breakpoint on the turn before the last"),
    ):
        new_extra, old_extra = extra[turn_before]
        print(
            f"      {label}: ~{tokens(new_extra):,} vs ~{tokens(old_extra):,} tokens "
            f"(ratio {new_extra / old_extra:.3f})"
        )
    print(
        f"    uncached share of the side request (modelled Anthropic cache after the parent): "
        f"{side_miss / side_all:.3f} (~{tokens(side_miss):,} of ~{tokens(side_all):,} tokens); "
        f"forced and pinned as before RFD 033 was restored: {pin_miss / pin_all:.3f} "
        f"(~{tokens(pin_miss):,} tokens)"
    )
    print(
        f"      (the asking call itself is ~{tokens(asking_bytes):,} tokens; the old pattern "
        f"also has the model generate ~{tokens(recall):,} output tokens for the re-call)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay-ms", type=int, default=500)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "data").mkdir()
        lines, one, many = run(args, home)
    report_tokens(lines)
    t1, tn = statistics.median(one), statistics.median(many)
    print(f"(b) fake-provider latency {args.delay_ms} ms per answer, median of {args.rounds}:")
    print(
        f"    1 inquiry: {t1 * 1000:.0f} ms per turn; {args.parallel} parallel inquiries: "
        f"{tn * 1000:.0f} ms per turn"
    )
    print(
        f"    ratio {args.parallel}/1 = {tn / t1:.2f} (serialized would be about "
        f"{(t1 + (args.parallel - 1) * args.delay_ms / 1000) / t1:.2f})"
    )


if __name__ == "__main__":
    main()
