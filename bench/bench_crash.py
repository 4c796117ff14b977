"""kill -9 of the daemon at random moments of streaming turns: how much text is lost.

Each round starts `jpd` on stdio with a scripted model that streams a long answer,
kills it (SIGKILL) once a random amount of text reached the client, then recovers the
log the way a restarted daemon does and compares: the text the client was shown against
the interrupted message saved from checkpoints. Every log must load with every turn
ended. Prints the characters lost per kill and how that compares with what streams in
one checkpoint interval (protocol.md section 12.4).

Run from the repository root (Linux; about a second per kill):

    python -m bench.bench_crash [--kills 20] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import signal
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.longrun import scripted_env  # noqa: E402
from bench.rpcclient import Client  # noqa: E402
from jpd.conversation.jsonl.threaded import ThreadedStore  # noqa: E402
from jpd.conversation.recovery import recover  # noqa: E402
from jpd.core.checkpoints import INTERVAL  # noqa: E402

CHUNK, DELAY_MS = 4, 10
TEXT = " ".join(f"word{i}" for i in range(2000))


async def one_kill(home: Path, rng: random.Random) -> tuple[int, int]:
    """(characters shown to the client, characters saved) for one kill."""
    env = scripted_env(home, 1)
    script = {"responses": [{"text": TEXT, "chunk": CHUNK, "delay_ms": DELAY_MS}]}
    Path(env["JP_CONFIG"]).parent.joinpath("script.json").write_text(json.dumps(script))
    client, process = await Client.spawn(env)
    await client.initialize()
    started = await client.request("turn/start", {"message": "stream"})
    target = rng.randint(20, 2000)
    shown = "".join(
        n["params"]["event"]["text"]
        for n in client.notifications
        if n["params"]["event"]["kind"] == "text_delta"
    )
    while len(shown) < target:
        message = json.loads(await client.read_body())
        event = message.get("params", {}).get("event", {})
        if event.get("kind") == "text_delta":
            shown += event["text"]
    process.send_signal(signal.SIGKILL)
    await process.wait()
    store = ThreadedStore(Path(env["JP_DATA_DIR"]))
    cid = started["conversationId"]
    lock = await store.lock_turn(cid)
    assert lock is not None, "the killed daemon's turn lock was not released"
    await recover(store, cid)
    await lock.release()
    events = await store.load(cid)
    assert [e.type for e in events if e.type in ("turn_start", "turn_end")] == [
        "turn_start",
        "turn_end",
    ]
    saved = "".join(
        e.message or "" for e in events if e.type == "chat_response" and e.message is not None
    )
    assert TEXT.startswith(saved)
    await store.close()
    return len(shown), len(saved)


async def main(kills: int, seed: int) -> None:
    rng = random.Random(seed)
    rate = CHUNK / (DELAY_MS / 1000)
    losses = []
    print(f"{'kill':>4}  {'shown':>6}  {'saved':>6}  {'lost':>5}")
    for number in range(1, kills + 1):
        with tempfile.TemporaryDirectory(prefix="jpd-bench-crash-") as tmp:
            shown, saved = await one_kill(Path(tmp), rng)
        losses.append(shown - saved)
        print(f"{number:>4}  {shown:>6}  {saved:>6}  {shown - saved:>5}")
    interval_chars = rate * INTERVAL
    print(
        f"kills survived: {kills}/{kills} (every log loaded, every turn ended)\n"
        f"characters lost per kill: min {min(losses)}, median {sorted(losses)[len(losses) // 2]}, "
        f"max {max(losses)}; one checkpoint interval streams ~{interval_chars:.0f} characters "
        f"({rate:.0f} characters/s x {INTERVAL} s): max lost / interval = "
        f"{max(losses) / interval_chars:.2f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # recovery warns once per recovered log
    asyncio.run(main(args.kills, args.seed))
