"""Round trip of a trivial request (`turn/list`) to a real `jpd` over stdio.

1000 sequential calls after a warm-up; prints p50/p99 and, measured side by side in
the same run, the same framing round trip against an in-process echo over a pipe
pair (the floor any JSON-RPC over pipes pays), with their ratio.
Run: python bench/bench_rpc.py [--calls N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO, Any


def frame(obj: dict[str, Any]) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def read_frame(stream: IO[bytes]) -> dict[str, Any]:
    header = b""
    while not header.endswith(b"\r\n\r\n"):
        header += stream.read(1)
    length = int(header.split(b":")[1].split(b"\r\n")[0])
    result: dict[str, Any] = json.loads(stream.read(length))
    return result


def measure(write: IO[bytes], read: IO[bytes], calls: int, method: str) -> list[float]:
    samples = []
    for i in range(calls):
        start = time.perf_counter()
        write.write(frame({"jsonrpc": "2.0", "id": i, "method": method}))
        write.flush()
        read_frame(read)
        samples.append(time.perf_counter() - start)
    return samples


def echo_server(inp: IO[bytes], out: IO[bytes]) -> None:
    while True:
        try:
            msg = read_frame(inp)
        except (ValueError, IndexError):
            return
        out.write(frame({"jsonrpc": "2.0", "id": msg["id"], "result": {"turns": []}}))
        out.flush()


def pct(samples: list[float], q: float) -> float:
    return sorted(samples)[min(len(samples) - 1, int(q * len(samples)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "JP_DATA_DIR": tmp}
        proc = subprocess.Popen(
            [sys.executable, "-m", "jpd"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        assert proc.stdin and proc.stdout
        proc.stdin.write(
            frame(
                {
                    "jsonrpc": "2.0",
                    "id": "init",
                    "method": "initialize",
                    "params": {"protocolVersion": 1, "clientInfo": {"name": "bench"}},
                }
            )
        )
        proc.stdin.flush()
        read_frame(proc.stdout)
        measure(proc.stdin, proc.stdout, 50, "turn/list")
        daemon = measure(proc.stdin, proc.stdout, args.calls, "turn/list")
        proc.stdin.close()
        proc.wait(10)

    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    server_in, server_out = os.fdopen(r1, "rb"), os.fdopen(w2, "wb")
    threading.Thread(target=echo_server, args=(server_in, server_out), daemon=True).start()
    client_out, client_in = os.fdopen(w1, "wb"), os.fdopen(r2, "rb")
    measure(client_out, client_in, 50, "turn/list")
    floor = measure(client_out, client_in, args.calls, "turn/list")

    print(f"calls: {args.calls}")
    print(f"jpd turn/list      p50 {pct(daemon, 0.5):7.3f} ms  p99 {pct(daemon, 0.99):7.3f} ms")
    print(f"pipe echo (floor)  p50 {pct(floor, 0.5):7.3f} ms  p99 {pct(floor, 0.99):7.3f} ms")
    print(f"ratio p50 jpd/floor: {statistics.median(daemon) / statistics.median(floor):.1f}x")


if __name__ == "__main__":
    main()
