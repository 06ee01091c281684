"""What change jobs send to evaluate and repair an engine: built from validated parts, the pip
reinstall under `sudo -n` (the engine's venv is root's), the benchmark client without it."""

from __future__ import annotations

import pytest

from hosts import commands, engine_commands
from hosts.models import Host
from hosts.services import command_line_for

PYTHON = "/opt/vllm/.venv/bin/python3"


def test_the_reinstall_is_exactly_the_version_found_and_nothing_else():
    argv = engine_commands.pip_reinstall(PYTHON, "vllm", "0.11.2")
    assert argv == [
        PYTHON, "-m", "pip", "install", "--force-reinstall", "--no-deps",
        "--disable-pip-version-check", "--root-user-action=ignore", "vllm==0.11.2",
    ]  # fmt: skip
    wheels = engine_commands.pip_reinstall(PYTHON, "vllm", "0.11.2+cu128", find_links="/opt/wheels")
    assert wheels[-4:] == ["--no-index", "--find-links", "/opt/wheels", "vllm==0.11.2+cu128"]


@pytest.mark.parametrize(
    ("dist", "version", "links"),
    [
        ("vllm; rm -rf /", "0.11.2", ""),
        ("vllm", "0.11.2 --index-url=http://evil", ""),
        ("vllm", "", ""),
        ("vllm", "0.11.2", "relative/dir"),
        ("vllm", "0.11.2", "/opt/wheels --pre"),
    ],
)
def test_a_reinstall_from_a_hostile_report_is_never_built(dist, version, links):
    with pytest.raises(commands.UnsafeCommand):
        engine_commands.pip_reinstall(PYTHON, dist, version, find_links=links)


def test_pip_runs_as_root_and_the_benchmark_client_does_not():
    host = Host(name="gpu-01", address="127.0.0.1", use_sudo=True)
    pip = engine_commands.pip_reinstall(PYTHON, "vllm", "0.11.2")
    assert command_line_for(host, pip).startswith(f"sudo -n {PYTHON} -m pip install ")
    bench = engine_commands.bench_client(
        PYTHON, port=8000, model="kimi-k2.5", concurrency=1, input_tokens=8, output_tokens=8,
        timeout=10, num_requests=1,
    )  # fmt: skip
    assert command_line_for(host, bench).startswith(f"{PYTHON} -I - --url")
    probe = commands.integrity_check(PYTHON, "vllm")
    assert not command_line_for(host, probe).startswith("sudo")
    host.use_sudo = False
    assert command_line_for(host, pip).startswith(PYTHON)


def test_the_benchmark_client_takes_requests_or_a_duration_and_validated_values():
    common = {"port": 8000, "model": "kimi-k2.5", "input_tokens": 8, "output_tokens": 8,
              "timeout": 10}  # fmt: skip
    with pytest.raises(commands.UnsafeCommand, match="either"):
        engine_commands.bench_client(PYTHON, concurrency=1, **common)
    with pytest.raises(commands.UnsafeCommand, match="either"):
        engine_commands.bench_client(PYTHON, concurrency=1, num_requests=1, duration=5, **common)
    for bad in ({"concurrency": 0}, {"concurrency": True}, {"concurrency": 513}):
        with pytest.raises(commands.UnsafeCommand):
            engine_commands.bench_client(PYTHON, num_requests=1, **common, **bad)
    with pytest.raises(commands.UnsafeCommand):
        engine_commands.bench_client(
            PYTHON, concurrency=1, num_requests=1, prompts=("a\x00b",), **common
        )
    with pytest.raises(commands.UnsafeCommand):
        engine_commands.bench_client(
            "python3", concurrency=1, num_requests=1, **common
        )  # a relative interpreter


def test_api_requests_read_their_body_from_stdin():
    argv = engine_commands.api_request(8000, "chat", max_seconds=55)
    assert argv[-3:] == ["--data-binary", "@-", "http://127.0.0.1:8000/v1/chat/completions"]
    assert engine_commands.chat_completion_request(8000) == argv
    assert engine_commands.api_request(8000, "completions")[-1].endswith("/v1/completions")
    with pytest.raises(commands.UnsafeCommand):
        engine_commands.api_request(8000, "admin")
    with pytest.raises(commands.UnsafeCommand):
        engine_commands.api_request(70000, "chat")
