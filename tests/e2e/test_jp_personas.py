"""Named config files and personas (`--cfg NAME|PATH`, `extends`, `config_load_paths`)
and `jp config set` (issue 37 item 3), through the real `jp` and `jpd --listen`."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.sockets import Daemons
from tests.e2e.test_jp_daily import jp_in
from tests.e2e.test_jp_from_jp import recorded, recording_env


async def test_a_persona_with_extends_and_its_stickiness(tmp_path: Path, daemons: Daemons) -> None:
    env = recording_env(tmp_path)
    named = Path(env["JP_CONFIG"]).parent / "config"
    named.mkdir()
    (named / "base.toml").write_text("[assistant.model.parameters]\ntemperature = 0.2\n")
    (named / "reviewer.toml").write_text(
        'extends = ["base"]\n[assistant]\nsystem_prompt = "You review code."\n'
        '[assistant.model]\nid = "test/reviewer"\n'
    )
    await daemons.start(env)
    ran = jp_in(env, tmp_path, "query", "--new", "--cfg", "reviewer", "look")
    assert ran.returncode == 0, ran.stderr
    again = jp_in(env, tmp_path, "query", "and this")  # the conversation keeps the persona
    assert again.returncode == 0, again.stderr
    first, second = recorded(tmp_path)
    for request in (first, second):
        assert request["model"] == "reviewer"
        assert request["system"] == "You review code."
        assert request["temperature"] == 0.2

    shown = jp_in(env, tmp_path, "config", "show", "--cfg", "reviewer")
    assert 'assistant.system_prompt = "You review code."' in shown.stdout

    # A path names a file directly; `extends` resolves next to the extending file.
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "p.toml").write_text('extends = ["./q.toml"]\n')
    (other / "q.toml").write_text('[assistant]\nsystem_prompt = "Q."\n')
    by_path = jp_in(env, tmp_path, "query", "--new", "--cfg", str(other / "p.toml"), "x")
    assert by_path.returncode == 0, by_path.stderr
    assert recorded(tmp_path)[-1]["system"] == "Q."


async def test_bad_named_files_are_clear_errors_before_anything_is_sent(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = recording_env(tmp_path)
    named = Path(env["JP_CONFIG"]).parent / "config"
    named.mkdir()
    (named / "a.toml").write_text('extends = ["b"]\n')
    (named / "b.toml").write_text('extends = ["a"]\n')
    (named / "typo.toml").write_text('[assistant]\nsystem_promt = "x"\n')
    # A repository's persona is not used until its workspace config is trusted.
    (tmp_path / ".jp" / "config").mkdir(parents=True)
    (tmp_path / ".jp" / "config" / "repo.toml").write_text('[assistant]\nsystem_prompt = "r"\n')
    await daemons.start(env)
    missing = jp_in(env, tmp_path, "query", "--new", "--cfg", "nope", "x")
    assert missing.returncode == 1 and "no config named 'nope'" in missing.stderr
    assert str(named) in missing.stderr
    loop = jp_in(env, tmp_path, "query", "--new", "--cfg", "a", "x")
    assert loop.returncode == 1 and "extends loops" in loop.stderr
    typo = jp_in(env, tmp_path, "query", "--new", "--cfg", "typo", "x")
    assert typo.returncode == 1 and "typo.toml" in typo.stderr
    assert "system_promt" in typo.stderr
    untrusted = jp_in(env, tmp_path, "query", "--new", "--cfg", "repo", "x")
    assert untrusted.returncode == 1 and "no config named 'repo'" in untrusted.stderr
    assert recorded(tmp_path) == []


async def test_config_set_keeps_comments_and_the_daemon_uses_it(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = recording_env(tmp_path)
    config = Path(env["JP_CONFIG"])
    config.write_text("# my settings\n" + config.read_text())
    await daemons.start(env)
    done = jp_in(env, tmp_path, "config", "set", "assistant.system_prompt", "Be kind.")
    assert done.returncode == 0, done.stderr
    temp = jp_in(env, tmp_path, "config", "set", "assistant.model.parameters.temperature", "0.7")
    assert temp.returncode == 0, temp.stderr
    text = config.read_text()
    assert text.startswith("# my settings\n") and 'system_prompt = "Be kind."' in text
    assert jp_in(env, tmp_path, "query", "--new", "hi").returncode == 0
    assert recorded(tmp_path)[-1]["system"] == "Be kind."
    assert recorded(tmp_path)[-1]["temperature"] == 0.7
    assert jp_in(env, tmp_path, "config", "unset", "assistant.system_prompt").returncode == 0
    assert "system_prompt" not in config.read_text()
    gone = jp_in(env, tmp_path, "config", "unset", "assistant.system_prompt")
    assert gone.returncode == 1 and "is not set" in gone.stderr
    persona = tmp_path / "persona.toml"
    made = jp_in(
        env, tmp_path, "config", "set", "--file", str(persona), "assistant.model.id", "test/p"
    )
    assert made.returncode == 0 and 'id = "test/p"' in persona.read_text()
