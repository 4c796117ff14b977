"""Asking a person at the terminal: `inquiry/prompt` questions and `tool/permission`.

Pure logic over a `PromptIO` (the real one is `jpcli.tty.TerminalIO`), so it can
be tested with scripted lines. Standard library only.

Booleans take `y`/`n`; uppercase `Y`/`N` also remember the answer for the rest of the
turn (`remember: true`), offered only when the question's persistence allows it. A
select question shows numbered options and answers with the option's text; a
multi_select one takes several numbers or names (`1,3` or `1 3`); a number question
takes a number within its bounds. A choice, choices or number ending in `!` (`2!`) is
also remembered for the rest of the turn, when the question's persistence allows it,
and so is a text answer ending in ` !!` (the marker is not part of the answer).
Empty input takes the default when there is one. Invalid input is explained and asked
again.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from jpcli.callview import call_lines, short_call
from jpcli.render import format_tool_call, one_line

TEXT_REMEMBER = " !!"
"""Ends a text answer that is to be used again for the rest of the turn."""

BOLD = "\x1b[1m"
RESET = "\x1b[0m"
_PREVIEW_LINES = 8
_PREVIEW_WIDTH = 160
_YES = ("y", "yes")
ANSWER_TYPES = ("boolean", "select", "text", "secret", "number", "multi_select")
"""The answer types `jp` can prompt (declared in `initialize`); the daemon sends no others."""
_NO = ("n", "no")


class PromptIO(Protocol):
    """Where prompts are written and answers read."""

    def write(self, text: str) -> None: ...
    def read_line(self, prompt: str, *, secret: bool = False) -> str: ...


class BadPrompt(ValueError):
    """The daemon's request cannot be shown (missing or malformed fields)."""


def parse_boolean(
    line: str, *, default: bool | None = None, can_remember: bool = True
) -> tuple[bool, bool]:
    """`y`/`yes`/`n`/`no` (any case) -> (answer, remember).

    A lone uppercase `Y` or `N` remembers the answer for the turn when `can_remember`.
    Empty input takes `default`. Raises `ValueError` with a hint otherwise.
    """
    text = line.strip()
    if not text and default is not None:
        return default, False
    remember = can_remember and text in ("Y", "N")
    if text.lower() in _YES:
        return True, remember
    if text.lower() in _NO:
        return False, remember
    hint = "y or n (Y or N: and the same for the rest of this turn)" if can_remember else "y or n"
    raise ValueError(f"please answer {hint}")


def parse_select(line: str, options: list[str], default: str | None = None) -> str:
    """The option chosen by its number (1-based) or its exact text; empty takes `default`.

    Raises `ValueError` naming the valid range otherwise.
    """
    text = line.strip()
    if not text and default is not None and default in options:
        return default
    if text.isdigit() and 1 <= int(text) <= len(options):
        return options[int(text) - 1]
    if text in options:
        return text
    folded = [option for option in options if option.lower() == text.lower()]
    if text and len(folded) == 1:
        return folded[0]
    raise ValueError(f"please choose a number from 1 to {len(options)}")


def parse_number(
    line: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    integer: bool = False,
    default: float | None = None,
) -> int | float:
    """A number within `minimum`..`maximum` (whole with `integer`); empty takes `default`."""
    text = line.strip()
    if not text and default is not None:
        return default
    wanted = "a whole number" if integer else "a number"
    try:
        value: int | float = int(text) if integer else float(text)
    except ValueError:
        raise ValueError(f"please type {wanted}") from None
    if isinstance(value, float) and value.is_integer() and "." not in text and "e" not in text:
        value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"please type {wanted} of at least {minimum}")
    if maximum is not None and value > maximum:
        raise ValueError(f"please type {wanted} of at most {maximum}")
    return value


def parse_multi_select(
    line: str,
    options: list[str],
    *,
    min_items: int | None = None,
    max_items: int | None = None,
    default: list[str] | None = None,
) -> list[str]:
    """Options chosen by number or text, separated by commas or spaces, in the order
    given (no repeats); empty takes `default` (else none)."""
    text = line.strip()
    if not text:
        chosen = list(default or [])
    else:
        chosen = []
        for word in text.replace(",", " ").split():
            choice = parse_select(word, options)
            if choice not in chosen:
                chosen.append(choice)
    if min_items is not None and len(chosen) < min_items:
        raise ValueError(f"please choose at least {min_items}")
    if max_items is not None and len(chosen) > max_items:
        raise ValueError(f"please choose at most {max_items}")
    return chosen


def _yes_no(value: bool) -> str:
    return "yes" if value else "no"


class Prompts:
    """Renders questions on a `PromptIO` and reads the answers."""

    def __init__(self, io: PromptIO, *, color: bool = True) -> None:
        self.io = io
        self.color = color
        self._can_remember = True

    def _remember_mark(self, line: str) -> tuple[str, bool]:
        """A choice or number ending in `!` is remembered for the rest of the turn (when
        the question allows it)."""
        text = line.rstrip()
        if self._can_remember and text.endswith("!"):
            return text[:-1], True
        return line, False

    # --- inquiry/prompt --------------------------------------------------------------

    def inquiry(self, params: Any) -> dict[str, Any]:
        """Ask one `inquiry/prompt` question; returns the result `{answer, remember}`.

        Raises `BadPrompt` for params it cannot show, and lets `PromptCancelled` and
        `PromptDismissed` from the terminal through.
        """
        question = _table(params, "question")
        text = question.get("text")
        answer_type = _table(question, "answerType")
        kind = answer_type.get("type")
        if not isinstance(text, str) or kind not in ANSWER_TYPES:
            raise BadPrompt("inquiry/prompt needs question.text and a known answerType")
        label = params.get("promptLabel") or params.get("toolName") or "question"
        lines = [self._header(str(label))]
        context = question.get("context")
        if isinstance(context, str) and context.strip():
            lines += [f"  {line}" for line in context.strip().splitlines()]
        error = params.get("previousError")
        if error:
            lines.append(f"jp: that answer was refused: {one_line(str(error), 300)}")
        intro = "\n".join(lines) + "\n"
        default = question.get("default")
        can_remember = question.get("persistence", "turn") != "none"
        self._can_remember = can_remember
        if kind == "boolean":
            return self._boolean(intro, text, default, can_remember)
        if kind == "select":
            options = answer_type.get("options")
            if not isinstance(options, list) or not options:
                raise BadPrompt("a select question needs answerType.options")
            return self._select(intro, text, [str(o) for o in options], default)
        if kind == "multi_select":
            options = answer_type.get("options")
            if not isinstance(options, list) or not options:
                raise BadPrompt("a multi_select question needs answerType.options")
            return self._multi(intro, text, [str(o) for o in options], answer_type, default)
        if kind == "number":
            return self._number(intro, text, answer_type, default)
        return self._text(intro, text, default, secret=kind == "secret")

    def _number(
        self, intro: str, text: str, answer_type: dict[str, Any], default: Any
    ) -> dict[str, Any]:
        low, high = answer_type.get("minimum"), answer_type.get("maximum")
        bounds = {
            "minimum": low if isinstance(low, int | float) else None,
            "maximum": high if isinstance(high, int | float) else None,
            "integer": bool(answer_type.get("integer")),
        }
        fallback = default if isinstance(default, int | float) else None
        shown = f" (default: {fallback})" if fallback is not None else ""
        span = ""
        if bounds["minimum"] is not None or bounds["maximum"] is not None:
            span = f" [{'' if low is None else low}..{'' if high is None else high}]"
        ask = f"{text}{span}{shown} "
        prompt = f"{intro}{ask}"
        while True:
            line, remember = self._remember_mark(self.io.read_line(prompt))
            try:
                value = parse_number(line, default=fallback, **bounds)  # type: ignore[arg-type]
            except ValueError as exc:
                prompt = f"jp: {exc}\n{ask}"
                continue
            return {"answer": value, "remember": remember}

    def _multi(
        self,
        intro: str,
        text: str,
        options: list[str],
        answer_type: dict[str, Any],
        default: Any,
    ) -> dict[str, Any]:
        fallback = [d for d in default if d in options] if isinstance(default, list) else None
        low, high = answer_type.get("minItems"), answer_type.get("maxItems")
        listing = "".join(f"  {n}. {option}\n" for n, option in enumerate(options, 1))
        shown = (
            f" (default: {', '.join(str(options.index(d) + 1) for d in fallback)})"
            if fallback
            else ""
        )
        ask = f"Choose any of 1-{len(options)}, e.g. 1,3{shown}: "
        prompt = f"{intro}{text}\n{listing}{ask}"
        while True:
            line, remember = self._remember_mark(self.io.read_line(prompt))
            try:
                chosen = parse_multi_select(
                    line,
                    options,
                    min_items=low if isinstance(low, int) else None,
                    max_items=high if isinstance(high, int) else None,
                    default=fallback,
                )
            except ValueError as exc:
                prompt = f"jp: {exc}\n{ask}"
                continue
            return {"answer": chosen, "remember": remember}

    def _boolean(self, intro: str, text: str, default: Any, can_remember: bool) -> dict[str, Any]:
        fallback = default if isinstance(default, bool) else None
        keys = "y/n/Y/N" if can_remember else "y/n"
        shown = f" (default: {_yes_no(fallback)})" if fallback is not None else ""
        prompt = f"{intro}{text} [{keys}]{shown} "
        while True:
            line = self.io.read_line(prompt)
            try:
                answer, remember = parse_boolean(line, default=fallback, can_remember=can_remember)
            except ValueError as exc:
                prompt = f"jp: {exc}\n{text} [{keys}]{shown} "
                continue
            return {"answer": answer, "remember": remember}

    def _select(self, intro: str, text: str, options: list[str], default: Any) -> dict[str, Any]:
        fallback = default if isinstance(default, str) and default in options else None
        listing = "".join(f"  {n}. {option}\n" for n, option in enumerate(options, 1))
        shown = f" (default: {options.index(fallback) + 1})" if fallback is not None else ""
        ask = f"Choose 1-{len(options)}{shown}: "
        prompt = f"{intro}{text}\n{listing}{ask}"
        while True:
            line, remember = self._remember_mark(self.io.read_line(prompt))
            try:
                return {"answer": parse_select(line, options, fallback), "remember": remember}
            except ValueError as exc:
                prompt = f"jp: {exc}\n{ask}"

    def _text(self, intro: str, text: str, default: Any, *, secret: bool) -> dict[str, Any]:
        # The daemon never sends a secret's default; never show one anyway.
        fallback = default if isinstance(default, str) and not secret else None
        shown = f" (default: {json.dumps(fallback, ensure_ascii=False)})" if fallback else ""
        hidden = " (hidden)" if secret else ""
        line = self.io.read_line(f"{intro}{text}{shown}{hidden} ", secret=secret)
        if not line and fallback is not None:
            return {"answer": fallback, "remember": False}
        if not secret and self._can_remember and line.endswith(TEXT_REMEMBER):
            # A lone `!` may end a sentence; ` !!` is the deliberate mark.
            return {"answer": line[: -len(TEXT_REMEMBER)], "remember": True}
        return {"answer": line, "remember": False}

    # --- tool/permission -------------------------------------------------------------

    def permission(self, params: Any, seen: dict[str, Any] | None = None) -> dict[str, Any]:
        """Ask a `tool/permission` request; returns the result `{allow, remember}`.
        `seen` is the call's `tool_call` event when it was seen (its title and, for an
        edit, the whole file before and after: shown as a diff with line numbers)."""
        if not isinstance(params, dict) or not isinstance(params.get("toolName"), str):
            raise BadPrompt("tool/permission needs toolName")
        call = format_tool_call(params["toolName"], params.get("arguments"), 200)
        if params.get("kind") == "deliver":
            lines = [
                self._header("Permission"),
                f"{call} finished; send its result to the assistant?",
                *_preview(params.get("content")),
            ]
            question = "Deliver the result?"
        elif params.get("kind") == "sampling":
            # An MCP server asks the model for a completion (protocol.md 9.7).
            arguments = params.get("arguments")
            messages = arguments.get("messages") if isinstance(arguments, dict) else None
            texts = [m.get("text") for m in messages or [] if isinstance(m, dict)]
            lines = [
                self._header("Permission"),
                f"the MCP server of {params['toolName']} asks the model to answer:",
                *_preview("\n".join(t for t in texts if isinstance(t, str))),
            ]
            question = "Let the model answer it?"
        else:
            from jpcli.diffs import edit_preview, numbered_diff

            # The whole call, nothing cut: the user approves what they read.
            name, arguments = params["toolName"], params.get("arguments")
            short = short_call(name, arguments)
            diff = (seen or {}).get("diff")
            title = (seen or {}).get("title")
            if (
                isinstance(diff, dict)
                and isinstance(diff.get("newText"), str)
                and isinstance(title, str)
                and name in ("fs_modify_file", "fs_create_file")
            ):
                # The title names the file; the diff is the whole change, once.
                lines = [self._header("Permission"), f"the assistant wants to: {title}"]
                old = diff.get("oldText")
                lines += numbered_diff(
                    old if isinstance(old, str) else None, diff["newText"], color=self.color
                )
            elif short is not None:
                lines = [self._header("Permission"), f"the assistant wants to run {short}"]
            else:
                lines = [
                    self._header("Permission"),
                    "the assistant wants to run:",
                    *call_lines(name, arguments),
                ]
            # A created file's content is shown whole above: not a second time.
            if name != "fs_create_file" and not lines[1].startswith("the assistant wants to: "):
                lines += edit_preview(name, arguments, color=self.color)
            if isinstance(params.get("content"), str):
                lines.append(params["content"])  # e.g. why a protected path is asked
            question = f"Allow running {params['toolName']}?"
        prompt = "\n".join(lines) + f"\n{question} [y/n/Y/N] "
        while True:
            line = self.io.read_line(prompt)
            try:
                allow, remember = parse_boolean(line)
            except ValueError as exc:
                prompt = f"jp: {exc}\n{question} [y/n/Y/N] "
                continue
            result: dict[str, Any] = {"allow": allow, "remember": remember}
            if not allow and params.get("kind") != "sampling":
                reason = self.io.read_line("Why not? (the assistant is told; Enter to skip) ")
                if reason.strip():
                    result["reason"] = reason.strip()
            return result

    def _header(self, label: str) -> str:
        title = f"── {one_line(label, 60)} ──"
        return f"\n{BOLD}{title}{RESET}" if self.color else f"\n{title}"


def _table(parent: Any, key: str) -> dict[str, Any]:
    value = parent.get(key) if isinstance(parent, dict) else None
    return value if isinstance(value, dict) else {}


def _preview(content: Any) -> list[str]:
    """The first lines of a result, indented and cut, with a count of what is left out."""
    if not isinstance(content, str) or not content.strip():
        return ["  │ (empty result)"]
    lines = content.rstrip("\n").splitlines()
    shown = [f"  │ {one_line(line, _PREVIEW_WIDTH)}" for line in lines[:_PREVIEW_LINES]]
    if len(lines) > _PREVIEW_LINES:
        rest = len(lines) - _PREVIEW_LINES
        shown.append(f"  │ … ({rest} more line{'s' if rest != 1 else ''})")
    return shown
