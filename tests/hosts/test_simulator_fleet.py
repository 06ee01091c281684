"""The fleet as a whole: hundreds of hosts in one process, and the `simfleet` command."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import asyncssh
import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from hosts.commands import ProbeSpec, ServerSpec, probe_script
from hosts.simulator import catalog, host_names, running_fleet
from tests.fleet import FleetHandle, ssh

PROBE = probe_script(ProbeSpec(servers=(ServerSpec(catalog.DEFAULT_UNIT, 8000),)))


async def _probe_all(fleet: FleetHandle, limit: int = 100) -> list[str]:
    key = asyncssh.import_private_key(fleet.client_private_key)
    gate = asyncio.Semaphore(limit)

    async def one(name: str) -> str:
        async with (
            gate,
            asyncssh.connect(
                fleet.address,
                fleet.port(name),
                username="root",
                client_keys=[key],
                known_hosts=([asyncssh.import_public_key(fleet.host_public_key(name))], [], []),
                agent_path=None,
                config=None,
            ) as conn,
        ):
            return str((await conn.run(PROBE, check=True)).stdout)

    return await asyncio.gather(*(one(n) for n in fleet.names))


def test_two_hundred_hosts_start_in_one_process_and_answer(tmp_path: Path) -> None:
    started = time.monotonic()
    with running_fleet(200, state_dir=tmp_path) as fleet:
        boot = time.monotonic() - started
        assert fleet.names[0] == "gpu-001" and fleet.names[-1] == "gpu-200"
        ports = [fleet.port(n) for n in fleet.names]
        assert ports == list(range(ports[0], ports[0] + 200))
        outputs = asyncio.run(_probe_all(fleet))
    assert all(o.rstrip().endswith(f"@@cp:end:metrics:{catalog.DEFAULT_UNIT}:0") for o in outputs)
    assert all("@@cp:http:200" in o for o in outputs)
    assert len({o.split("\n")[1].split(", ")[1] for o in outputs}) == 200  # distinct GPU UUIDs
    assert boot < 5, f"starting 200 hosts took {boot:.1f} s"
    assert time.monotonic() - started < 10


def test_host_names_widen_past_99() -> None:
    assert host_names(3) == ["gpu-01", "gpu-02", "gpu-03"]
    assert host_names(100)[:2] == ["gpu-001", "gpu-002"] and host_names(100)[-1] == "gpu-100"


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


def test_sim_fleet_fixture_is_quick(make_fleet) -> None:
    started = time.monotonic()
    fleet = make_fleet(2)
    assert time.monotonic() - started < 0.5  # typically ~20 ms
    assert ssh(fleet, "gpu-01", "hostname").stdout == "gpu-01\n"
