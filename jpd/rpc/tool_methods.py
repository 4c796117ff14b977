"""The handlers of what a client can look up and run outside a turn: `tool/*`,
`model/list`, `config/show` (`jpd.rpc.methods` maps the method table to them)."""

from __future__ import annotations

from jpd.core.daemon import Daemon
from jpd.protocol.base import WireModel
from jpd.protocol.config_requests import ConfigEntry, ConfigShowParams, ConfigShowResult
from jpd.protocol.model_requests import ModelListParams, ModelListResult, ProviderStatus
from jpd.protocol.tool_requests import (
    ToolCallParams,
    ToolCallResult,
    ToolInfo,
    ToolListParams,
    ToolListResult,
)
from jpd.rpc.session import Session


async def config_show(daemon: Daemon, session: Session, p: ConfigShowParams) -> WireModel:
    """The effective config, one leaf per entry, with the layer it came from."""
    renv = daemon.request_env(session, p.environment)
    overrides = p.config
    if p.config_files:
        from jpd.config.merge import deep_merge

        overrides = deep_merge(await daemon.configs.named(renv, p.config_files), p.config or {})
    rows, warnings = await daemon.configs.show(renv, overrides)
    return ConfigShowResult(
        entries=[
            ConfigEntry(key=key, value=value, origin=origin, redacted=redacted)
            for key, value, origin, redacted in rows
        ],
        warnings=warnings,
    )


async def model_list(daemon: Daemon, session: Session, p: ModelListParams) -> WireModel:
    """Providers (usable or why not), the default model and the aliases."""
    from jpd.llm.registry import key_variable

    cfg, statuses = await daemon.list_models(session, p.environment)
    return ModelListResult(
        default_model=cfg.assistant.model.id,
        aliases=dict(cfg.aliases),
        providers=[
            ProviderStatus(
                name=name,
                available=problem is None,
                key_variable=key_variable(cfg, name),
                problem=problem,
                models=models,
            )
            for name, problem, models in statuses
        ],
    )


async def tool_list(daemon: Daemon, session: Session, p: ToolListParams) -> WireModel:
    """The effective tools (enabled or not) with their JSON schemas."""
    tools = await daemon.list_tools(session, p.environment)
    return ToolListResult(
        tools=[
            ToolInfo(
                name=t.name,
                source=t.source,
                server=t.mcp.server if t.mcp else None,
                mcp_tool=t.mcp.tool if t.mcp else None,
                enabled=t.enabled,
                run=t.config.run,
                result=t.config.result,
                summary=t.config.summary or t.config.description,
                parameters=t.schema,
                hidden=t.config.style.hidden,
            )
            for t in tools
        ]
    )


async def tool_call(daemon: Daemon, session: Session, p: ToolCallParams) -> WireModel:
    """Run one tool outside a turn; questions and permissions are asked as in a turn."""
    content, is_error = await daemon.call_tool(
        session, p.name, p.arguments, p.conversation_id, p.detached, p.environment
    )
    return ToolCallResult(content=content, is_error=is_error)
