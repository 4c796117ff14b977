"""`jp turn ls`, `jp daemon status` and `jp daemon stop`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TextIO

from jpcli.render import format_time, one_line
from jpcli.rpc import Connection, ConnectionClosed

EXIT_OK = 0
EXIT_ERROR = 1
_HANGUP_TIMEOUT = 30.0  # seconds for a stopping daemon to record its turns and hang up


def _dump(result: Any, out: TextIO) -> None:
    out.write(json.dumps(result, ensure_ascii=False) + "\n")


def running_turns(listed: Any) -> list[dict[str, Any]]:
    """The running turns of a `turn/list` result (not the resumable ones)."""
    turns = listed.get("turns") if isinstance(listed, dict) else None
    return [t for t in turns or [] if isinstance(t, dict) and not t.get("resumable")]


def resumable_turns(listed: Any) -> list[dict[str, Any]]:
    """The interrupted turns `turn/resume` can continue, oldest first."""
    turns = listed.get("turns") if isinstance(listed, dict) else None
    return [t for t in turns or [] if isinstance(t, dict) and t.get("resumable")]


def _turn_row(turn: dict[str, Any]) -> str:
    started = format_time(turn.get("startedAt"), seconds=True)
    return "  ".join(
        [
            str(turn.get("turnId", "?")),
            str(turn.get("conversationId", "?")),
            str(turn.get("model", "?")),
            f"started {started}",
        ]
    )


def _table(parent: dict[str, Any], key: str) -> dict[str, Any]:
    value = parent.get(key)
    return value if isinstance(value, dict) else {}


def _inquiry_row(inquiry: dict[str, Any]) -> str:
    prompt = _table(inquiry, "prompt")
    permission = _table(inquiry, "permission")
    question = _table(prompt, "question")
    tool = inquiry.get("toolName", "?")
    if inquiry.get("kind") == "permission":
        what = f"permission to {permission.get('kind', 'run')} {tool}"
    else:
        what = f"{tool}: {one_line(str(question.get('text', '?')), 100)}"
    waiting = "  (waiting for a client)" if inquiry.get("deferred") else ""
    return (
        f"? {inquiry.get('inquiryId', '?')}  {inquiry.get('conversationId', '?')}  {what}{waiting}"
    )


def turn_list(connection: Connection, *, out: TextIO, err: TextIO, as_json: bool) -> int:
    """`jp turn ls`: running turns, then pending questions."""
    result = connection.request("turn/list", {})
    if as_json:
        _dump(result, out)
        return EXIT_OK
    turns = [t for t in (result.get("turns") or []) if isinstance(t, dict)]
    inquiries = [q for q in (result.get("inquiries") or []) if isinstance(q, dict)]
    if not turns and not inquiries:
        err.write("jp: no running turns\n")
    for turn in turns:
        resumable = "  (interrupted: jp turn resume)" if turn.get("resumable") else ""
        out.write(_turn_row(turn) + resumable + "\n")
    for inquiry in inquiries:
        out.write(_inquiry_row(inquiry) + "\n")
    return EXIT_OK


def _duration(seconds: float) -> str:
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    shown = [f"{value}{unit}" for value, unit in parts if value] or ["0s"]
    return " ".join(shown[:2])


def daemon_status(connection: Connection, *, out: TextIO, as_json: bool) -> int:
    """`jp daemon status`: pid, version, uptime, socket, clients, running turns."""
    result = connection.request("daemon/status", {})
    if as_json:
        _dump(result, out)
        return EXIT_OK
    uptime = result.get("uptime")
    up = _duration(uptime) if isinstance(uptime, int | float) else "?"
    turns = [t for t in (result.get("runningTurns") or []) if isinstance(t, dict)]
    lines = [
        f"jpd {result.get('version', '?')}, pid {result.get('pid', '?')}, up {up}",
        f"socket:  {result.get('socketPath') or 'none (a private daemon on stdio)'}",
        f"clients: {result.get('clients', '?')} (this one included)",
        f"data:    {result.get('dataDir', '?')}",
        f"config:  {result.get('configPath', '?')} (when a request sends no environment)",
        f"log:     {result.get('logFile') or 'stderr'}",
        f"running turns: {len(turns)}",
        *(f"  {_turn_row(turn)}" for turn in turns),
    ]
    out.write("\n".join(lines) + "\n")
    return EXIT_OK


def daemon_stop(
    connection: Connection, *, out: TextIO, err: TextIO, wait_stopped: Callable[[], bool] | None
) -> int:
    """`jp daemon stop`: running turns are cancelled and recorded, then the daemon exits.

    Returns once the daemon has hung up (its turns recorded) and, with `wait_stopped`,
    once its process is gone.
    """
    result = connection.request("daemon/stop", {})
    cancelled = len(result.get("cancelledTurns") or []) if isinstance(result, dict) else 0
    deadline = time.monotonic() + _HANGUP_TIMEOUT
    try:
        while time.monotonic() < deadline:
            connection.receive(timeout=0.2)  # events until the daemon hangs up
        err.write("jp: error: jpd did not stop in time\n")
        return EXIT_ERROR
    except ConnectionClosed:
        pass
    if wait_stopped is not None and not wait_stopped():
        err.write("jp: error: jpd hung up but its process is still running\n")
        return EXIT_ERROR
    note = (
        f" ({cancelled} running turn{'s' if cancelled != 1 else ''} cancelled)" if cancelled else ""
    )
    out.write(f"jpd stopped{note}\n")
    return EXIT_OK


EXIT_NOTHING_RUNNING = 4
CANCEL_WAIT = 10.0  # seconds `jp turn cancel` waits for the turn to record its end


def turn_cancel(
    connection: Connection,
    conversation: str | None,
    *,
    out: TextIO,
    err: TextIO,
    current: str | None = None,
) -> int:
    """`jp turn cancel [CONVERSATION]`: cancel the running turn of a conversation (an id
    or unique prefix; default: this workspace's `current` one, else the only running
    turn) and wait until its end is recorded. Exit 4 when nothing runs there."""
    result = connection.request("turn/list", {})
    turns = running_turns(result)
    if conversation is not None:
        chosen = [t for t in turns if str(t.get("conversationId", "")).startswith(conversation)]
    else:
        chosen = [t for t in turns if t.get("conversationId") == current] or (
            turns if len(turns) == 1 else []
        )
        if not chosen and len(turns) > 1:
            err.write(f"jp: {len(turns)} turns are running; name the conversation:\n")
            for turn in turns:
                err.write(f"  {_turn_row(turn)}\n")
            return EXIT_ERROR
    if not chosen:
        where = f" in {conversation}" if conversation else ""
        err.write(f"jp: no turn is running{where}\n")
        return EXIT_NOTHING_RUNNING
    if len(chosen) > 1:
        err.write(
            f"jp: {conversation!r} matches {len(chosen)} running turns; give more of the id\n"
        )
        return EXIT_ERROR
    turn_id = str(chosen[0].get("turnId"))
    cancelled = connection.request("turn/cancel", {"turnId": turn_id})
    if not (isinstance(cancelled, dict) and cancelled.get("cancelled")):
        err.write(f"jp: turn {turn_id} had already ended\n")
        return EXIT_OK
    stop = _wait_turn(connection, turn_id)
    out.write(
        f"cancelled {turn_id} in {chosen[0].get('conversationId')}"
        + ("" if stop else " (still stopping)")
        + "\n"
    )
    return EXIT_OK


def _wait_turn(connection: Connection, turn_id: str) -> str | None:
    """`turn/wait` within `CANCEL_WAIT`; the stop reason, None when it took longer."""
    from jpcli.rpc import RpcError

    try:
        result = connection.request("turn/wait", {"turnId": turn_id}, timeout=CANCEL_WAIT)
    except RpcError:
        return "ended"  # already gone: its end is recorded
    except TimeoutError:
        return None
    reason = result.get("stopReason") if isinstance(result, dict) else None
    return str(reason or "ended")


def model_list(
    connection: Connection, *, out: TextIO, as_json: bool, environment: dict[str, Any]
) -> int:
    """`jp models`: the default model, each provider (usable, or why not), the aliases."""
    result = connection.request("model/list", {"environment": environment})
    if as_json:
        _dump(result, out)
        return EXIT_OK
    lines = [f"default model: {result.get('defaultModel', '?')}", "providers:"]
    for provider in result.get("providers") or []:
        if not isinstance(provider, dict):
            continue
        name = str(provider.get("name", "?"))
        key = provider.get("keyVariable")
        if provider.get("available"):
            state = "ready" + (f" (key in ${key})" if key else "")
        else:
            state = f"unavailable: {one_line(str(provider.get('problem', '?')), 100)}"
        lines.append(f"  {name:<18} {state}")
        models = provider.get("models")
        if isinstance(models, list):
            lines += [f"    {name}/{model}" for model in models if isinstance(model, str)]
    aliases = result.get("aliases") or {}
    if isinstance(aliases, dict) and aliases:
        lines.append("aliases (use with -m):")
        lines += [f"  {alias} = {target}" for alias, target in sorted(aliases.items())]
    out.write("\n".join(lines) + "\n")
    return EXIT_OK
