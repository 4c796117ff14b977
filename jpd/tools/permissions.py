"""Permission to run a tool and to deliver its result (`run`/`result` = "ask").

Asked of attached clients that declared `capabilities.permission`; with none, the
detached policy for the kind (`run` or `deliver`) decides: `auto` allows, `deny` and
`defaults` refuse, `defer` waits for a capable client until `detached_timeout` and
then applies `detached_fallback`. An answer may be remembered for the rest of the turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from jpd.config.tools import ToolConfig
from jpd.inquiry.pending import Answer, Desk, Request, now
from jpd.protocol.client_port import ClientLink
from jpd.protocol.server_requests import PendingInfo, PermissionParams, PermissionResult

Kind = Literal["run", "deliver"]
DetachedMode = Literal["auto", "defaults", "deny", "defer"]


@dataclass
class PermissionGate:
    """Permission decisions for one turn."""

    desk: Desk
    conversation_id: str
    turn_id: str
    detached_override: DetachedMode | None = None
    remembered: dict[tuple[Kind, str], bool] = field(default_factory=dict)

    async def allowed(
        self,
        kind: Kind,
        tool_name: str,
        tool: ToolConfig,
        call_id: str,
        arguments: dict[str, Any],
        content: str | None = None,
    ) -> bool:
        """Whether the tool may run (`run`) or its result go to the model (`deliver`)."""
        key = (kind, tool_name)
        if key in self.remembered:
            return self.remembered[key]
        request = self._request(kind, tool_name, call_id, arguments, content)
        outcome = await self.desk.ask(request, wait=False, wait_limit=None)
        if outcome is None:
            mode = self.detached_override or tool.detached_mode(kind)
            if mode == "defer":
                outcome = await self.desk.ask(request, wait=True, wait_limit=tool.detached_timeout)
                if outcome is None:
                    mode = tool.detached_fallback
            if outcome is None:
                return mode == "auto"
        if not isinstance(outcome, Answer):
            return False
        allow = bool(outcome.value)
        if outcome.remember:
            self.remembered[key] = allow
        return allow

    def _request(
        self,
        kind: Kind,
        tool_name: str,
        call_id: str,
        arguments: dict[str, Any],
        content: str | None,
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
        )

        def parse(result: Any) -> tuple[Any, bool]:
            parsed = PermissionResult.model_validate(result)
            return parsed.allow, parsed.remember

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
            method="tool/permission",
            params=lambda _error: params.to_wire(),
            can_answer=can_answer,
            parse=parse,
            parse_direct=parse_direct,
        )
