"""JP's config spellings (jpd/config/jp_compat.py) and the system prompt's instruction
files and sections (jpd/core/instructions.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from jpd.config import Config, ConfigError, validate_layer
from jpd.config.jp_compat import translate
from jpd.config.models import AssistantConfig
from jpd.core.configs import kept_config
from jpd.core.instructions import MAX_FILE_BYTES, system_prompt


def test_model_id_tables_become_provider_slash_name() -> None:
    data, warnings = translate(
        {
            "assistant": {"model": {"id": {"provider": "anthropic", "name": "claude-x"}}},
            "conversation": {
                "inquiry": {"assistant": {"model": {"id": {"provider": "o", "name": "m"}}}}
            },
        }
    )
    config = validate_layer(data, source="t")
    assert config.assistant.model.id == "anthropic/claude-x"
    assert config.conversation.inquiry.assistant is not None
    assert warnings == []


def test_an_id_table_with_more_keys_is_left_for_validation_to_refuse() -> None:
    data, _ = translate({"assistant": {"model": {"id": {"provider": "a", "name": "b", "x": 1}}}})
    with pytest.raises(ConfigError, match=r"assistant\.model\.id"):
        validate_layer(data, source="t")


def test_mcp_servers_of_jp_merge_under_jpds_own() -> None:
    data, warnings = translate(
        {
            "providers": {"mcp": {"a": {"command": "srv", "arguments": ["-x"], "optional": True}}},
            "mcp": {"servers": {"a": {"enable": False}}},
        }
    )
    config = validate_layer(data, source="t")
    server = config.mcp.servers["a"]
    assert server.command == ["srv", "-x"]
    assert server.enable is False  # jpd's own spelling wins where both set a key
    assert warnings == ["providers.mcp.a.optional: not used by jpd"]


def test_a_variable_without_a_value_is_not_passed_from_the_daemon() -> None:
    data, warnings = translate(
        {"providers": {"mcp": {"a": {"command": "s", "variables": ["AWS_SECRET"]}}}}
    )
    assert validate_layer(data, source="t").mcp.servers["a"].env == {}
    assert "AWS_SECRET not passed" in warnings[0]


def test_unknown_providers_and_jp_only_keys_are_dropped_with_a_warning() -> None:
    data, warnings = translate(
        {
            "providers": {"llm": {"google": {"api_key_env": "G"}}},
            "editor": {"cmd": "vim"},
            "conversation": {"tools": {"fs": {"style": {"inline_results": "full"}}}},
        }
    )
    validate_layer(data, source="t")
    assert warnings == [
        "providers.llm.google: provider not supported by jpd; ignored",
        "editor: a JP setting jpd does not use; ignored",
        "conversation.tools.fs.style.inline_results: a JP setting jpd does not use; ignored",
    ]


def test_typos_are_still_errors() -> None:
    data, _ = translate({"assistent": {"system_prompt": "x"}})
    with pytest.raises(ConfigError, match="assistent"):
        validate_layer(data, source="t")


def test_the_input_is_not_changed() -> None:
    original = {"providers": {"mcp": {"a": {"command": "s"}}}, "style": {}}
    translate(original)
    assert original == {"providers": {"mcp": {"a": {"command": "s"}}}, "style": {}}


def test_agents_files_are_names_never_paths() -> None:
    for bad in ("../AGENTS.md", "/etc/passwd", "..", ""):
        with pytest.raises(ConfigError):
            validate_layer({"assistant": {"agents_files": [bad]}}, source="t")


def test_sections_and_instructions_in_position_order() -> None:
    assistant = Config.model_validate(
        {
            "assistant": {
                "system_prompt": "Base.",
                "system_prompt_sections": ["plain", {"content": "first", "position": -1}],
                "instructions": ["Title only", {"title": "T", "items": ["a", "b"]}],
                "agents_files": [],
            }
        }
    ).assistant
    text = system_prompt(assistant, None).text
    assert text == (
        "Base.\n\nfirst\n\nplain\n\n<instruction>\n# Title only\n</instruction>\n\n"
        "<instruction>\n# T\n\n- a\n- b\n</instruction>"
    )


def test_hostile_instruction_files_are_not_read(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    (root / "a" / "AGENTS.md").mkdir(parents=True)  # a folder by that name
    (root / "a" / "b").mkdir()
    (root / "AGENTS.md").write_text("x" * (MAX_FILE_BYTES + 1))
    outside = tmp_path / "key"
    outside.write_text("PRIVATE")
    os.symlink(outside, root / "a" / "b" / "AGENTS.md")
    prompt = system_prompt(AssistantConfig(), root / "a" / "b")
    assert prompt.text is None and prompt.files == []
    assert sorted(prompt.skipped) == [
        f"AGENTS.md: larger than {MAX_FILE_BYTES} bytes; not read",
        "a/AGENTS.md: not a regular file",
        "a/b/AGENTS.md: links out of the workspace; not read",
    ]


def test_a_link_inside_the_workspace_is_read(tmp_path: Path) -> None:
    (tmp_path / ".jp").mkdir()
    (tmp_path / "docs.md").write_text("see docs")
    os.symlink(tmp_path / "docs.md", tmp_path / "AGENTS.md")
    assert system_prompt(AssistantConfig(), tmp_path).files == ["AGENTS.md"]


def test_a_conversation_keeps_the_assistant_part_only() -> None:
    kept = kept_config(
        {"assistant": {"system_prompt": "a"}}, {"assistant": {"model": {"id": "x/y"}}}
    )
    assert kept == {"assistant": {"system_prompt": "a", "model": {"id": "x/y"}}}
    assert kept_config(kept, {"conversation": {"tools": {"*": {"run": "unattended"}}}}) == kept


async def test_bad_attachment_specs_are_invalid_params(tmp_path: Path) -> None:
    from jpd.core.attachments import resolve
    from jpd.core.html_text import html_text
    from jpd.protocol.errors import InvalidParams

    for spec, said in (
        ("http://", "attachment http://"),
        ("ftp://x", "unknown scheme"),
        ("cmd://", "give a command"),
        ("jp://c-1", "cannot be read here"),
        ("/etc/passwd", "inside the workspace"),
    ):
        with pytest.raises(InvalidParams, match=re.escape(said)):
            await resolve([spec], root=tmp_path, env={})
    (tmp_path / "bin").write_bytes(b"\0\1\2")
    with pytest.raises(InvalidParams, match="binary"):
        await resolve(["bin"], root=tmp_path, env={})
    assert html_text("<p>a<b>b</b></p><style>x{}</style><p>c &amp; d</p>") == "ab\nc & d"
