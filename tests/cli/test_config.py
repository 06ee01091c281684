"""Where cpctl gets the server and the token: the environment or a config file only its owner
can read; never the command line. And what it says when there is nothing to talk to."""

from __future__ import annotations

import os
import socket

import pytest

from controlplane.cli import config
from controlplane.cli.exits import CliError, ExitCode

SECRET = "cpt_0123abcd_thisisnotarealtokenbutlookslikeone"


@pytest.mark.parametrize(
    "args",
    [
        ("--token", SECRET, "hosts", "list"),
        ("hosts", "list", f"--token={SECRET}"),
        ("--url", "https://cp.example.com", "hosts", "list"),
        ("changes", "approve", "1", "--snapshot", "latest", "--reason", "ok", "--token", SECRET),
    ],
)
def test_there_is_no_option_for_a_token_or_the_server(cpctl_offline, args):
    ran = cpctl_offline(*args)
    assert ran.code == ExitCode.USAGE, ran
    assert "CPCTL_TOKEN" in ran.err and "ps" in ran.err, ran
    # Said without repeating it: the secret is in the shell's history already, not in a log.
    assert SECRET not in ran.out + ran.err


def test_without_a_server_it_says_what_to_set(cpctl_offline):
    ran = cpctl_offline("hosts", "list")
    assert ran.code == ExitCode.USAGE, ran
    assert "CPCTL_URL and CPCTL_TOKEN" in ran.err
    assert "Traceback" not in ran.err


def test_a_config_file_others_may_read_is_refused(cpctl_offline, tmp_path):
    path = tmp_path / "home" / ".config" / "cpctl" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(f'url = "http://127.0.0.1:9"\ntoken = "{SECRET}"\n')
    for mode in (0o644, 0o640, 0o604, 0o620):
        path.chmod(mode)
        ran = cpctl_offline("hosts", "list")
        assert ran.code == ExitCode.USAGE, ran
        assert f"{mode:04o}" in ran.err and "chmod 600" in ran.err, ran
        assert SECRET not in ran.out + ran.err
    # Mode 0600: read, and the server it names is tried (nothing listens on port 9).
    path.chmod(0o600)
    ran = cpctl_offline("hosts", "list")
    assert ran.code == ExitCode.UNREACHABLE, ran


def test_a_config_file_someone_else_owns_is_refused(cpctl_offline, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root (CI runs as root)")
    path = tmp_path / "cpctl.toml"
    path.write_text(f'url = "http://127.0.0.1:9"\ntoken = "{SECRET}"\n')
    path.chmod(0o600)
    os.chown(path, 65534, 65534)  # nobody: whoever can write it could point cpctl elsewhere
    ran = cpctl_offline("hosts", "list", env={"CPCTL_CONFIG": str(path)})
    assert ran.code == ExitCode.USAGE, ran
    assert "belongs to another user" in ran.err


def test_the_config_file_names_only_known_keys(cpctl_offline, tmp_path):
    path = tmp_path / "cpctl.toml"
    path.write_text(f'url = "http://127.0.0.1:9"\ntokne = "{SECRET}"\n')
    path.chmod(0o600)
    ran = cpctl_offline("hosts", "list", env={"CPCTL_CONFIG": str(path)})
    assert ran.code == ExitCode.USAGE, ran
    assert "unknown keys tokne" in ran.err


def test_a_server_that_does_not_answer_is_exit_10(cpctl_offline):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {"CPCTL_URL": f"http://127.0.0.1:{port}", "CPCTL_TOKEN": SECRET}
    ran = cpctl_offline("changes", "list", env=env)
    assert ran.code == ExitCode.UNREACHABLE, ran
    assert f"cannot reach http://127.0.0.1:{port}" in ran.err
    assert "Traceback" not in ran.err and SECRET not in ran.err


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://cp.example.com", "over plain http"),
        ("http://10.1.2.3:8000", "over plain http"),
        ("https://user:pw@cp.example.com", "user name or password"),
        ("ftp://cp.example.com", "not an http(s) address"),
        ("cp.example.com", "not an http(s) address"),
    ],
)
def test_urls_that_would_expose_the_token_are_refused_before_any_request(url, message):
    # In-process: a regression here must not send anything to those addresses.
    with pytest.raises(CliError) as refused:
        config.load({"CPCTL_URL": url, "CPCTL_TOKEN": SECRET, "CPCTL_CONFIG": "/nonexistent"})
    assert refused.value.code == ExitCode.USAGE
    assert message in refused.value.message


def test_plain_http_is_for_this_machine_or_when_asked_for():
    env = {"CPCTL_TOKEN": SECRET, "CPCTL_CONFIG": "/nonexistent"}
    for url in ("http://localhost:8000", "http://127.0.0.1:8000/api/v1/", "http://[::1]:8000"):
        assert config.load({**env, "CPCTL_URL": url}).api.endswith(":8000/api/v1/")
    found = config.load({**env, "CPCTL_URL": "http://cp.lan/", "CPCTL_ALLOW_HTTP": "1"})
    assert found.api == "http://cp.lan/api/v1/"


def test_a_token_with_a_newline_is_refused_without_repeating_it():
    with pytest.raises(CliError) as refused:
        config.load({"CPCTL_URL": "https://cp.example.com", "CPCTL_TOKEN": "cpt_a\nInjected: 1"})
    assert refused.value.code == ExitCode.USAGE
    assert "Injected" not in refused.value.message
