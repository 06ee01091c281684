"""`make run` on a machine where its ports are taken: the demo refuses before starting anything,
and says which port and what to run instead."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from django.core.management import CommandError, call_command


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port something already listens on."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


@pytest.fixture(autouse=True)
def run_dir(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DEMO_RUN_DIR", str(tmp_path / "run"))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_taken_web_port_is_refused_with_the_command_to_run_instead(held_port) -> None:
    with pytest.raises(CommandError) as refused:
        call_command("demo", "--bind", f"127.0.0.1:{held_port}", "--hosts", "1",
                     "--base-port", str(free_port()))  # fmt: skip
    assert f"port {held_port} on 127.0.0.1 is taken" in str(refused.value)
    assert f"make run PORT={held_port + 80}" in str(refused.value)


def test_a_taken_fleet_port_is_refused(held_port) -> None:
    with pytest.raises(CommandError) as refused:
        call_command("demo", "--bind", f"127.0.0.1:{free_port()}", "--hosts", "1",
                     "--base-port", str(held_port))  # fmt: skip
    assert f"({held_port} taken)" in str(refused.value)
    assert "make run FLEET_PORT=" in str(refused.value)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--bind", "127.0.0.1:http"], "--bind takes HOST:PORT"),
        (["--bind", "127.0.0.1:70000"], "port must be 1 to 65535"),
        (["--hosts", "0"], "1 to 999 simulated hosts"),
    ],
)
def test_bad_arguments_are_refused_in_words(argv, said) -> None:
    with pytest.raises(CommandError, match=said):
        call_command("demo", *argv)
