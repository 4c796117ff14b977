"""Permission to run a tool and to deliver its result (`run`/`result` = "ask").

Asked of attached clients that declared `capabilities.permission`; with none, the
detached policy for the kind (`run` or `deliver`) decides (`jpd.inquiry.detached`,
protocol.md section 10.5): `auto` allows, `deny` and `defaults` refuse (a permission
request has no default), `defer` waits for a capable client until `detached_timeout` and
then applies `detached_fallback`. An answer may be remembered for the rest of the turn.
The turn's permission mode (jpd.protocol.modes) comes first: it may allow without
asking, or refuse a writing tool or a command in `read-only`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jpd.config.tools import ToolConfig
from jpd.inquiry.detached import Automatic, ClientAnswered, apply_detached
from jpd.inquiry.pending import Answer, PendingQuestions, Reply, Request, now
from jpd.protocol.client_port import ClientLink
from jpd.protocol.detached import DetachedMode, PermissionKind
from jpd.protocol.method_table import TOOL_PERMISSION
from jpd.protocol.modes import PermissionMode
from jpd.protocol.server_requests import PendingInfo, PermissionParams, PermissionResult
from jpd.tools.approval_scope import approval_scope
from jpd.tools.modes import mode_decision


@dataclass(frozen=True)
class UserReason:
    """A refusal with the person's reason (`tool/permission` `reason`)."""

    text: str


@dataclass
class PermissionGate:
    """Permission decisions for one turn."""

    pending: PendingQuestions
    conversation_id: str
    turn_id: str
    detached_override: DetachedMode | None = None
    remembered: dict[tuple[PermissionKind, str, str], bool] = field(default_factory=dict)
    """(kind, tool, scope) -> the remembered answer (`approval_scope`)."""
    mode: PermissionMode = "ask"

    def mode_refusal(self, tool_name: str) -> str | None:
        """Why the turn's mode refuses `tool_name` outright, or None."""
        if mode_decision(self.mode, tool_name) == "refuse":
            return (
                f"the turn's permission mode {self.mode!r} (no file edits or commands); "
                "the user can run the turn in another mode"
            )
        return None

    async def allowed(
        self,
        kind: PermissionKind,
        tool_name: str,
        tool: ToolConfig,
        call_id: str,
        arguments: dict[str, Any],
        content: str | None = None,
    ) -> bool:
        """Whether the tool may run (`run`), its result go to the model (`deliver`), or
        its MCP server have the model complete a message (`sampling`)."""
        return await self.refusal(kind, tool_name, tool, call_id, arguments, content) is None

    async def refusal(
        self,
        kind: PermissionKind,
        tool_name: str,
        tool: ToolConfig,
        call_id: str,
        arguments: dict[str, Any],
        content: str | None = None,
    ) -> str | None:
        """None when allowed, else who refused: the user, or which detached policy."""
        if mode_decision(self.mode, tool_name) == "allow":
            return None
        scope = approval_scope(tool_name, arguments) if kind == "run" else ""
        key = (kind, tool_name, scope or "")
        if scope is not None and key in self.remembered:
            return None if self.remembered[key] else "the user (remembered for this turn)"
        label = "" if scope is None else f"{tool_name}: {scope}" if scope else tool_name
        request = self._request(kind, tool_name, call_id, arguments, content, label)
        reply = await self.pending.ask(request, wait=False, wait_limit=None)
        if reply is None:

            async def wait(limit: float) -> Reply | None:
                return await self.pending.ask(request, wait=True, wait_limit=limit)

            # A sampling request is governed like running the tool (section 9.7).
            policy = tool.detached_policy(
                "run" if kind == "sampling" else kind, self.detached_override
            )
            verdict = await apply_detached(policy, wait)
            if not isinstance(verdict, ClientAnswered):
                if isinstance(verdict, Automatic):
                    return None
                if policy.mode == "defer":
                    return (
                        f"the detached policy: nobody answered within {policy.timeout:g}s "
                        f"(defer), then its fallback {policy.fallback!r} applied"
                    )
                return f"the detached policy {policy.mode!r} (no client could ask the user)"
            reply = verdict.reply
        if not isinstance(reply, Answer):
            return "the user (the request was dismissed)"
        if isinstance(reply.value, UserReason):
            if reply.remember:
                self.remembered[key] = False
            return f"the user, who said: {reply.value.text}"
        allow = bool(reply.value)
        if reply.remember and scope is not None:
            self.remembered[key] = allow
        return None if allow else "the user"

    async def protected_refusal(
        self, tool_name: str, tool: ToolConfig, call_id: str, arguments: dict[str, Any], shown: str
    ) -> str | None:
        """None when the user allows this call to write the protected path `shown`:
        asked whatever the mode and the tool's `run`; remembered for that path only
        (any writing tool);
        with no client to ask, refused (or, under `defer`, asked of the first client
        that comes within the timeout)."""
        # Remembered for the path, whichever writing tool comes back to it.
        key: tuple[PermissionKind, str, str] = ("run", "", "protected:" + shown)
        if key in self.remembered:
            return None if self.remembered[key] else "the user (remembered for this turn)"
        content = (
            f"{tool_name} writes {shown}, a protected path: programs the user runs later "
            "read it (git hooks and config, jp's config, editor settings)"
        )
        request = self._request(
            "run", tool_name, call_id, arguments, content, f"protected path {shown}"
        )
        reply = await self.pending.ask(request, wait=False, wait_limit=None)
        if reply is None:
            policy = tool.detached_policy("run", self.detached_override)
            if policy.mode == "defer":
                reply = await self.pending.ask(request, wait=True, wait_limit=policy.timeout)
            if reply is None:
                return (
                    f"the protected-path rule: {shown} is a protected path, never written "
                    "unattended, and no client could ask the user"
                )
        if not isinstance(reply, Answer):
            return "the user (the request was dismissed)"
        allow = bool(reply.value)
        if reply.remember:
            self.remembered[key] = allow
        return None if allow else "the user"

    def _request(
        self,
        kind: PermissionKind,
        tool_name: str,
        call_id: str,
        arguments: dict[str, Any],
        content: str | None,
        remember_scope: str,
    ) -> Request:
        inquiry_id = f"{call_id}.permission.{kind}"
        params = PermissionParams(
            inquiry_id=inquiry_id,
            conversation_id=self.conversation_id,
            turn_id=self.turn_id,
            tool_call_id=call_id,
            tool_name=tool_name,
            arguments=arguments,
            kind=kind,
            content=content,
            remember_scope=remember_scope,
        )

        def parse(result: PermissionResult) -> tuple[Any, bool]:
            if not result.allow and result.reason and result.reason.strip():
                return UserReason(result.reason.strip()), result.remember
            return result.allow, result.remember

        def parse_direct(value: Any, remember: bool) -> tuple[Any, bool]:
            if not isinstance(value, bool):
                raise ValueError("a permission answer must be true (allow) or false (deny)")
            return value, remember

        def can_answer(link: ClientLink) -> bool:
            return link.capabilities.permission

        return Request(
            info=PendingInfo(
                inquiry_id=inquiry_id,
                kind="permission",
                conversation_id=self.conversation_id,
                turn_id=self.turn_id,
                tool_name=tool_name,
                deferred=False,
                asked_at=now(),
                permission=params,
            ),
            method=TOOL_PERMISSION,
            params=lambda _error: params,
            can_answer=can_answer,
            parse=parse,
            parse_direct=parse_direct,
        )
