"""`jpd`: the daemon. Serves one client on stdio (the Unix socket mode is planned)."""

from __future__ import annotations

import argparse
import logging
import os
import sys

import anyio

from jpd.rpc.stdio import claim_stdout
from jpd.server import create_server
from jpd.settings import Settings


def main(argv: list[str] | None = None) -> int:
    """Run the daemon; the exit code is 0 after `shutdown` + `exit`, else 1."""
    parser = argparse.ArgumentParser(prog="jpd", description=__doc__)
    parser.add_argument(
        "--log-level",
        default=os.environ.get("JPD_LOG_LEVEL", "WARNING"),
        help="log level for stderr (default WARNING; env JPD_LOG_LEVEL)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s jpd %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("pygls").setLevel(logging.WARNING)
    settings = Settings.from_env()
    out_fd = claim_stdout()
    server = create_server(settings)
    try:
        return anyio.run(server.run_stdio, sys.stdin.fileno(), out_fd)
    except KeyboardInterrupt:
        return 1


if __name__ == "__main__":
    sys.exit(main())
