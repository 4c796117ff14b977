"""The daemon does not import the MCP SDK until a config names a server."""

from __future__ import annotations

import subprocess
import sys


def test_daemon_start_up_does_not_import_the_mcp_sdk() -> None:
    code = (
        "import sys, jpd.server, jpd.core.daemon, jpd.tools.coordinator, jpd.mcp.manager;"
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
