"""One bench command: every figure of the performance table, each beside its reference
measured in the same run, as ratios (medians of interleaved rounds).

Run from the repository root (a few minutes on 2 cores; `--quick` for fewer rounds):

    python -m bench [--quick] [--only start,requests,tokens,fanout,history,context,local,turns]
        [--turns 100,1000]

`--only fleet` (not in the default run) measures the Postgres store: docs/scale.md.

It starts its own fake Anthropic server (2,000 tokens, one SSE event each), private
daemons on stdio and on temporary Unix sockets, and temporary data directories.
"""

from __future__ import annotations

import argparse
import compileall
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import fig_context, fig_history, fig_local, fig_start, fig_stream, fig_turns  # noqa: E402
from bench.report import Row, print_table  # noqa: E402

PARTS = ("start", "requests", "tokens", "fanout", "history", "context", "local", "turns")
OPT_IN = ("fleet",)  # `--only fleet`: needs Postgres's binaries (docs/scale.md)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (noisier)")
    parser.add_argument("--only", default=",".join(PARTS), help="comma-separated parts")
    parser.add_argument(
        "--turns",
        help="concurrent turn counts of the `turns` part (default 100,1000; quick 50,200)",
    )
    args = parser.parse_args()
    parts = set(args.only.split(","))
    if parts - set(PARTS + OPT_IN):
        unknown = ", ".join(sorted(parts - set(PARTS + OPT_IN)))
        parser.error(f"--only: unknown part(s) {unknown}")
    quick = args.quick
    base = {k: v for k, v in os.environ.items() if not k.startswith(("JP_", "JPD_"))}
    # Time the product as installed, with its bytecode, like the floor's packages: with
    # PYTHONDONTWRITEBYTECODE set (CI) a source checkout would otherwise compile every
    # module of `jpd` and `jp` again in each timed process.
    for package in ("jpd", "clients"):
        compileall.compile_dir(ROOT / package, quiet=1)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="jpd-bench-") as tmp:
        home = Path(tmp)
        if "start" in parts:
            sub = home / "start"
            sub.mkdir()
            env = fig_start.scripted_env(sub, base, 1000)
            rows += fig_start.startup(env, 5 if quick else 15)
        if "requests" in parts:
            sub = home / "requests"
            sub.mkdir()
            env = fig_start.scripted_env(sub, base, 10)
            rows += fig_start.requests(env, 500 if quick else 1000, 3 if quick else 5)
        if {"tokens", "fanout"} & parts:
            server, url = fig_stream.start_server(2000, 0.05, 0.0)
            try:
                if "tokens" in parts:
                    sub = home / "tokens"
                    sub.mkdir()
                    rows += fig_stream.tokens(sub, url, 8 if quick else 20)
                if "fanout" in parts:
                    sub = home / "fanout"
                    sub.mkdir()
                    rows += fig_stream.fan_out(sub, url, 3 if quick else 5)
            finally:
                if server.stdin is not None:
                    server.stdin.close()
                server.wait(10)
        if "history" in parts:
            sub = home / "history"
            sub.mkdir()
            rows += fig_history.history(sub, base, 3, 3 if quick else 6)
        if "context" in parts:
            rows += fig_context.context(200)
        if "local" in parts:
            sub = home / "local"
            sub.mkdir()
            rows += fig_local.embedded(sub, base, quick)
        if "turns" in parts:
            sub = home / "turns"
            sub.mkdir()
            default = "50,200" if quick else ",".join(map(str, fig_turns.COUNTS))
            counts = tuple(int(n) for n in (args.turns or default).split(","))
            rows += fig_turns.turns(sub, counts)
        if "fleet" in parts:
            from bench import fig_fleet

            rows += fig_fleet.fleet(base, quick)
    print_table(rows)


if __name__ == "__main__":
    main()
