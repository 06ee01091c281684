"""Drain hooks as command lines: templates an administrator writes are checked word by word,
placeholders are filled from validated rows, and the line is quoted like every other command."""

from __future__ import annotations

import shlex

import pytest

from hosts import commands, hook_commands
from hosts.commands import UnsafeCommand

VALUES = hook_commands.hook_values(host="gpu-01", unit="vllm-kimi-k25.service", port=8000)


def test_a_command_template_is_filled_in_and_quoted_word_by_word() -> None:
    argv = hook_commands.hook_command(
        ["/usr/local/bin/lb-drain", "out", "--backend={host}", "--unit", "{unit}:{port}"], VALUES
    )
    assert argv == [
        "/usr/local/bin/lb-drain",
        "out",
        "--backend=gpu-01",
        "--unit",
        "vllm-kimi-k25.service:8000",
    ]
    assert shlex.split(commands.join(argv)) == argv


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([], "1 to 32 words"),
        (["lb-drain", "out"], "absolute path"),
        (["/usr/bin/lb drain"], "absolute path"),
        (["/bin/sh", "-c", "lb-drain;reboot"], "word 3 may hold"),
        (["/x", "$(id)"], "word 2 may hold"),
        (["/x", "`id`"], "word 2 may hold"),
        (["/x", "a b"], "word 2 may hold"),
        (["/x", "a|b"], "word 2 may hold"),
        (["/x", "{hostname}"], "{hostname} is not a placeholder"),
        (["/x", "{host"], "a brace that is not part of a placeholder"),
        (["/x", "--token=hf_abcdefghijklmnopqrstuvwxyz"], "looks like a secret"),
        (["/x", *["w"] * 32], "1 to 32 words"),
        ("/x out", "a list of words"),
    ],
)
def test_command_templates_that_are_refused(argv: object, says: str) -> None:
    with pytest.raises(UnsafeCommand) as caught:
        hook_commands.check_command_template(argv)
    assert says in str(caught.value)


def test_an_http_hook_is_curl_on_the_host_without_redirects() -> None:
    argv = hook_commands.hook_request(
        "PUT", "http://127.0.0.1:8500/v1/agent/service/maintenance/{unit}?enable=true", VALUES, 10
    )
    assert argv == [
        "curl",
        "-sS",
        "-X",
        "PUT",
        "-m",
        "10",
        "--proto",
        "=http,https",
        "-w",
        f"\\n{commands.HTTP_MARK}%{{http_code}}\\n",
        "http://127.0.0.1:8500/v1/agent/service/maintenance/vllm-kimi-k25.service?enable=true",
    ]
    assert "-L" not in argv and "--location" not in argv


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("ftp://lb/drain", "http:// or https://"),
        ("file:///etc/passwd", "http:// or https://"),
        ("http://admin:pw@lb/drain", "credentials"),
        ("http://lb/drain#x", "fragment"),
        ("http://lb/drain now", "path and query may hold"),
        ("http://lb/$(id)", "path and query may hold"),
        ("http://lb/{nope}", "{nope} is not a placeholder"),
        ("http:///drain", "host name or an IP address"),
        ("http://lb/drain?key=ghp_abcdefghijklmnop", "looks like a secret"),
        ("http://lb/" + "a" * 500, "1 to 500 characters"),
    ],
)
def test_urls_that_are_refused(url: str, says: str) -> None:
    with pytest.raises(UnsafeCommand) as caught:
        hook_commands.check_url_template(url)
    assert says in str(caught.value)


@pytest.mark.parametrize(
    ("method", "timeout"), [("CONNECT", 10), ("post", 10), ("POST", 0), ("POST", 301)]
)
def test_methods_and_timeouts_outside_the_lists_are_refused(method: str, timeout: int) -> None:
    with pytest.raises(UnsafeCommand):
        hook_commands.hook_request(method, "http://lb/drain", VALUES, timeout)


@pytest.mark.parametrize(
    ("host", "unit", "port"),
    [
        ("gpu-01;reboot", "vllm.service", 8000),
        ("gpu-01", "$(id).service", 8000),
        ("gpu-01", "vllm.service", 0),
    ],
)
def test_placeholder_values_are_checked_before_they_are_used(host, unit, port) -> None:
    with pytest.raises(UnsafeCommand):
        hook_commands.hook_values(host=host, unit=unit, port=port)
