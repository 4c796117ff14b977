"""`jpcli.remote`: parsing `[user@]HOST[:/path]` (refusing what ssh would misread), the
ssh command, and what a remote request may carry of this machine (nothing)."""

from __future__ import annotations

import pytest
from jpcli import __version__
from jpcli.environment import client_environment
from jpcli.proxy import version_problem
from jpcli.remote import Remote, parse_remote, request_environment, ssh_command


def test_parse_host_user_and_workspace() -> None:
    assert parse_remote("devbox") == Remote("devbox")
    assert parse_remote(" me@devbox:/src/app/ ") == Remote("me@devbox", "/src/app")
    assert parse_remote("devbox:/src/../etc") == Remote("devbox", "/etc")


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "-oProxyCommand=touch /tmp/pwned",
        "-J evil",
        "dev box",
        "devbox;rm",
        "$(id)",
        "dev`id`",
        "devbox:",
        "devbox:relative",
        "devbox:/a\nb",
    ],
)
def test_attacks_and_mistakes_are_refused(spec: str) -> None:
    with pytest.raises(ValueError):
        parse_remote(spec)


def test_ssh_command_ends_options_before_the_host() -> None:
    assert ssh_command(Remote("me@devbox", "/x"), {}) == [
        "ssh",
        "-T",
        "--",
        "me@devbox",
        "jp proxy",
    ]
    env = {"JP_SSH": "ssh -p 2222", "JP_REMOTE_JP": "~/.local/bin/jp"}
    assert ssh_command(Remote("devbox"), env) == [
        "ssh",
        "-p",
        "2222",
        "-T",
        "--",
        "devbox",
        "~/.local/bin/jp proxy",
    ]


def test_a_remote_request_carries_nothing_of_this_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LAPTOP_SECRET", "x")
    monkeypatch.setenv("JP_REMOTE", "devbox:/src/app")
    assert client_environment() == {"cwd": "/src/app"}
    monkeypatch.setenv("JP_REMOTE", "devbox")
    assert client_environment() == {}
    assert request_environment("/home/me/app", {"JP_REMOTE": "devbox"}) == {"cwd": "/home/me/app"}
    local = request_environment("/home/me/app", {"A": "1"})
    assert local == {"cwd": "/home/me/app", "env": {"A": "1"}, "umask": local["umask"]}
    assert isinstance(local["umask"], int)
    monkeypatch.delenv("JP_REMOTE")
    assert client_environment()["env"]["LAPTOP_SECRET"] == "x"


def test_the_proxy_checks_only_its_own_clients_versions() -> None:
    def init(name: str, version: str) -> dict[str, object]:
        return {
            "method": "initialize",
            "params": {"clientInfo": {"name": name, "version": version}},
        }

    assert version_problem(init("jp", __version__)) is None
    assert version_problem(init("jp.nvim", "0.0.1")) is None
    assert version_problem({"method": "turn/list"}) is None
    problem = version_problem(init("jp-acp", "0.0.1"))
    assert problem is not None and "the client runs jp 0.0.1" in problem
