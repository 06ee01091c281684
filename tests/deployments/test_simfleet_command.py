"""`manage.py simfleet`: the options it refuses, serving until SIGTERM, and `--register` as a
newcomer runs it: a separate process, its own database; and where the simulator is not installed
(the production image), a refusal in words."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
from pathlib import Path

import asyncssh
import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from tests.without_simulator import WithoutSimulator

ROOT = Path(__file__).resolve().parents[2]


def _free_port_range(count: int) -> int:
    for base in range(24000, 30000, 50):
        try:
            socks = []
            for port in range(base, base + count):
                s = socket.socket()
                s.bind(("127.0.0.1", port))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


def test_simfleet_registers_hosts_on_the_ports_it_listens_on(tmp_path):
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path}/demo.sqlite3")
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], env=env, check=True, cwd=ROOT)
    base = _free_port_range(3)
    fleet = subprocess.Popen(
        [*manage, "simfleet", "--hosts", "3", "--base-port", str(base), "--register",
         "--state-dir", str(tmp_path / "fleet")],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert fleet.stdout is not None
        lines = []
        for line in fleet.stdout:
            lines.append(line)
            if "listening" in line:
                break
        assert any("registered 3 hosts" in line for line in lines), lines
        probe = subprocess.run(
            [*manage, "probe", "all", "--json"], env=env, cwd=ROOT, capture_output=True, text=True
        )
        assert probe.returncode == 0, probe.stderr
        assert probe.stdout.count('"status": "ok"') == 3, probe.stdout
    finally:
        fleet.send_signal(signal.SIGTERM)
        assert fleet.wait(20) == 0


def test_bad_fault_option_is_refused() -> None:
    with pytest.raises(CommandError, match="HOST=FAULT"):
        call_command("simfleet", "--hosts", "2", "--fault", "gpu-09=slow")
    with pytest.raises(CommandError, match="HOST=FAULT"):
        call_command("simfleet", "--hosts", "2", "--fault", "gpu-01=meltdown")


def _free_base(count: int) -> int:
    for _ in range(50):
        base = random.randrange(12000, 32000 - count)
        try:
            for port in range(base, base + count):
                with socket.socket() as sock:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free ports")


def test_simfleet_command_serves_until_sigterm(tmp_path: Path) -> None:
    base = _free_base(3)
    manage = Path(settings.BASE_DIR) / "manage.py"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(manage),
            "simfleet",
            "--hosts",
            "3",
            "--base-port",
            str(base),
            "--state-dir",
            str(tmp_path),
            "--fault",
            "gpu-03=gpu_driver_error",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "3 hosts (gpu-01..gpu-03) listening on 127.0.0.1:" in line, line
        assert f":{base}-{base + 2}" in line
        client_key = (tmp_path / "client_ed25519").read_text()
        pinned = (tmp_path / "hostkeys" / "gpu-03.pub").read_text()

        async def run() -> asyncssh.SSHCompletedProcess:
            async with asyncssh.connect(
                "127.0.0.1",
                base + 2,
                username="root",
                client_keys=[asyncssh.import_private_key(client_key)],
                known_hosts=([asyncssh.import_public_key(pinned)], [], []),
                agent_path=None,
                config=None,
            ) as conn:
                return await conn.run("hostname; nvidia-smi -L", check=False)

        result = asyncio.run(run())
        assert result.stdout.startswith("gpu-03\nNVIDIA-SMI has failed")
        assert result.exit_status == 9
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert "shutting down" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


NOT_INSTALLED = (
    "the simulator is not installed in this environment (it is a rehearsal tool; install the "
    "project from its source tree with `make install`)"
)


@pytest.mark.parametrize(
    "argv",
    [
        ["simfleet"],
        ["simfleet", "--hosts", "2", "--register", "--fault", "gpu-01=slow"],
        ["demo", "--hosts", "2"],
    ],
)
def test_without_the_simulator_the_fleet_commands_say_so(tmp_path: Path, argv: list[str]) -> None:
    """The production image carries no simulator: `simfleet` and `demo` refuse in words, before
    touching the database or a port, with a non-zero status and no traceback."""
    env = {**os.environ, "DEMO_RUN_DIR": str(tmp_path / "run"),
           "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none"}  # fmt: skip
    nosim = WithoutSimulator(tmp_path, env)
    result = subprocess.run([sys.executable, str(ROOT / "manage.py"), *argv], cwd=ROOT,
                            env=nosim.env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert NOT_INSTALLED in result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_without_the_simulator_its_help_says_why(tmp_path: Path) -> None:
    nosim = WithoutSimulator(tmp_path)
    result = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "help", "simfleet"],
        cwd=ROOT, env=nosim.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "not installed" in " ".join(result.stdout.split())
