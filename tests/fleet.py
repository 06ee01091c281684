"""Fixtures for tests that talk to simulated GPU hosts over real SSH.

`sim_fleet` is two hosts on free ports with a fast model load; `registered_fleet` also puts
them in the database through the same function `simfleet --register` uses; `make_fleet` builds
fleets of any size or with faults switched on from the start.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from simulator import catalog
from simulator.threaded import FleetHandle, HostHandle, running_fleet

__all__ = ["FleetHandle", "HostHandle", "RegisteredFleet", "running_fleet", "ssh", "ssh_connect"]

FAST_LOAD_SECONDS = 0.2
TEST_TIME_SCALE = 0.05


async def ssh_connect(
    fleet: FleetHandle, name: str, *, username: str = "root", pinned: str | None = None
) -> asyncssh.SSHClientConnection:
    """A real SSH connection to a simulated host, trusting only its own (or `pinned`) key."""
    key = pinned if pinned is not None else fleet.host_public_key(name)
    return await asyncssh.connect(
        fleet.address,
        fleet.port(name),
        username=username,
        client_keys=[asyncssh.import_private_key(fleet.client_private_key)],
        known_hosts=([asyncssh.import_public_key(key)], [], []),
        agent_path=None,
        config=None,
        connect_timeout=5,
    )


def ssh(
    fleet: FleetHandle,
    name: str,
    command: str,
    *,
    stdin: str | None = None,
    username: str = "root",
) -> asyncssh.SSHCompletedProcess:
    """Run one command line over a fresh SSH connection, from synchronous test code."""

    async def go() -> asyncssh.SSHCompletedProcess:
        async with await ssh_connect(fleet, name, username=username) as conn:
            return await conn.run(command, input=stdin, check=False)

    return asyncio.run(go())


@dataclass
class RegisteredFleet:
    """A running fleet plus the database rows that point at it."""

    fleet: FleetHandle
    hosts: list[Any]  # hosts.models.Host, in name order
    credential: Any = None  # hosts.models.Credential
    deployments: list[Any] = field(default_factory=list)  # deployments.models.Deployment

    def host(self, name: str) -> Any:
        return next(h for h in self.hosts if h.name == name)

    def __getattr__(self, name: str) -> Any:
        # Everything else (set_fault, state, command_log, ...) is the fleet handle's.
        return getattr(self.fleet, name)


@pytest.fixture
def make_fleet(tmp_path: Path) -> Iterator[Callable[..., FleetHandle]]:
    """`make_fleet(n, **running_fleet kwargs)`: fleets that stop when the test ends."""
    with ExitStack() as stack:
        counter = 0

        def make(n: int = 2, **kwargs: Any) -> FleetHandle:
            nonlocal counter
            counter += 1
            kwargs.setdefault("load_seconds", FAST_LOAD_SECONDS)
            # Generation paced by the performance model, 20x faster than real hosts.
            kwargs.setdefault("time_scale", TEST_TIME_SCALE)
            kwargs.setdefault("state_dir", tmp_path / f"simfleet-{counter}")
            return stack.enter_context(running_fleet(n, **kwargs))

        yield make


@pytest.fixture
def sim_fleet(make_fleet: Callable[..., FleetHandle]) -> FleetHandle:
    """Two simulated hosts (gpu-01, gpu-02) serving Kimi-K2.5 NVFP4, models load in 0.2 s."""
    return make_fleet(2)


def install_sudoers(fleet: FleetHandle, hosts: list[Any]) -> None:
    """What an operator does on each host they register: install the control plane's sudoers
    entry (hosts.sudoers), for the user it logs in as. The simulated hosts then refuse, as sudo
    does, whatever the entry does not allow, so every test on a registered fleet checks that
    the entry covers what the product sends under sudo. Engine repair may use the index or the
    wheel directory (tests switch a deployment between the two), so both are allowed."""
    from hosts.sudoers import SUDOERS_PATH, EngineInstall, sudoers_entry

    for host in hosts:
        engines = [
            EngineInstall(d.engine_python, catalog.VLLM_VERSION, d.engine_dist, source)
            for d in host.deployments.all()
            for source in ("", catalog.WHEEL_DIR)
        ]
        entry = sudoers_entry(
            user=host.username, environment_files=[catalog.ENV_FILE], engines=engines
        )
        fleet.write_file(host.name, SUDOERS_PATH, entry)


def register(fleet: FleetHandle) -> RegisteredFleet:
    from deployments.models import Deployment
    from deployments.simfleet_registration import register_fleet

    hosts = register_fleet(fleet.registration_info(), client_private_key=fleet.client_private_key)
    deployments = list(Deployment.objects.filter(host__in=hosts).order_by("host__name"))
    install_sudoers(fleet, hosts)
    return RegisteredFleet(
        fleet=fleet,
        hosts=hosts,
        credential=hosts[0].credential if hosts else None,
        deployments=deployments,
    )


@pytest.fixture
def registered_fleet(db: None, sim_fleet: FleetHandle) -> RegisteredFleet:
    """`sim_fleet`, registered: a Credential, Host rows with pinned keys, catalog, deployments."""
    return register(sim_fleet)
