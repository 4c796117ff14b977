"""The names of the detached policy (protocol.md section 10.2): what happens to a question
or permission request that no client can answer.

Defined here, in the bottom layer, because both the wire (`turn/start` and `tool/call`
`detached`) and config (`conversation.tools.<name>.detached`) carry these values.
"""

from __future__ import annotations

from typing import Literal

DetachedMode = Literal["auto", "defaults", "deny", "defer"]
DetachedFallback = Literal["auto", "defaults", "deny"]
"""What applies after a `defer` wait; `defer` itself is excluded: it would never end."""
PermissionKind = Literal["run", "deliver", "sampling"]
"""Permission to run a tool, to deliver its result to the model (section 10.5), or to let
its MCP server have the model complete a message (section 9.7)."""
DetachedKind = Literal["run", "deliver", "tool"]
"""`run`/`deliver`: the two permission requests; `tool`: a tool's question."""
