"""The fleet as a whole: hundreds of hosts in one process."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import asyncssh

from hosts.commands import ProbeSpec, ServerSpec
from hosts.probe_sections import probe_script
from simulator import catalog, host_names, running_fleet
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


def test_sim_fleet_fixture_is_quick(make_fleet) -> None:
    started = time.monotonic()
    fleet = make_fleet(2)
    assert time.monotonic() - started < 0.5  # typically ~20 ms
    assert ssh(fleet, "gpu-01", "hostname").stdout == "gpu-01\n"
