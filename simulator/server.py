"""Simulated hosts as real SSH servers: one asyncssh listener per host, all on one event loop.

Everything a probe costs is kept small so 500 hosts fit one process on two cores: keys are
loaded once at startup (and generated only the first time, then kept in the state dir),
commands run in-process without subprocesses, and idle hosts cost no timers.

This module holds the fleet; `ssh_host` one host's listener and sessions, `host_keys` the keys.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path

from . import shell
from .host_keys import load_or_create_key, public_key_text
from .http.loopback import LoopbackServer
from .ssh_host import SimHost, SimHostInfo
from .state import DEFAULT_LOAD_SECONDS, DEFAULT_SLOW_SECONDS, FAULTS, Machine
from .state.hardware import DEFAULT_HARDWARE
from .state.hardware import profile as hardware_profile

DEFAULT_STATE_DIR = Path(".run/simfleet")
CLIENT_KEY_NAME = "client_ed25519"
# Below Linux's default ephemeral range (32768-60999), where outgoing connections take ports.
_AUTO_PORT_LOW, _AUTO_PORT_HIGH = 12000, 32000


def host_names(count: int) -> list[str]:
    width = 3 if count > 99 else 2
    return [f"gpu-{i:0{width}d}" for i in range(1, count + 1)]


def _port_free(bind: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((bind, port))
        except OSError:
            return False
    return True


class SimFleet:
    """N simulated hosts on consecutive ports of one event loop."""

    def __init__(
        self,
        count: int,
        *,
        base_port: int | None = None,
        bind: str = "127.0.0.1",
        state_dir: str | os.PathLike[str] = DEFAULT_STATE_DIR,
        load_seconds: float = DEFAULT_LOAD_SECONDS,
        slow_seconds: float = DEFAULT_SLOW_SECONDS,
        faults: Mapping[str, Iterable[str]] | None = None,
        names: Iterable[str] | None = None,
        unit_styles: Mapping[str, str] | None = None,
        time_scale: float = 1.0,
        hardware: Mapping[str, str] | None = None,
    ) -> None:
        """`unit_styles` picks, per host name, the shape of the unit it boots with:
        "controlplane" (the default) or "envfile" (see catalog.envfile_unit_text).
        `time_scale`: real seconds per host second (0.01: a hundred times faster; simclock).
        `hardware` picks, per host name, its hardware profile (state.hardware.PROFILES; the
        default rtx-pro-6000 for hosts it does not name)."""
        self.names = list(names) if names is not None else host_names(count)
        self.base_port = base_port
        self.bind = bind
        self.state_dir = Path(state_dir)
        key_dir = self.state_dir / "hostkeys"
        self.client_key_path = self.state_dir / CLIENT_KEY_NAME
        client_key = load_or_create_key(self.client_key_path)
        self.client_private_key = self.client_key_path.read_text()  # stable, unlike re-export
        self.client_public_key = public_key_text(client_key)
        client_public_data = client_key.public_data
        self.hosts: list[SimHost] = []
        styles = dict(unit_styles or {})
        unknown = set(styles) - set(self.names)
        if unknown:
            raise KeyError(f"unit_styles names hosts the fleet does not have: {sorted(unknown)}")
        profiles = {name: hardware_profile(key) for name, key in (hardware or {}).items()}
        unknown = set(profiles) - set(self.names)
        if unknown:
            raise KeyError(f"hardware names hosts the fleet does not have: {sorted(unknown)}")
        for name in self.names:
            machine = Machine(
                name,
                load_seconds=load_seconds,
                slow_seconds=slow_seconds,
                unit_style=styles.get(name, "controlplane"),
                time_scale=time_scale,
                hardware=profiles.get(name, DEFAULT_HARDWARE),
            )
            self.hosts.append(
                SimHost(
                    machine,
                    host_key=load_or_create_key(key_dir / name),
                    rotated_key_path=key_dir / f"{name}.rotated",
                    client_public_data=client_public_data,
                    bind=bind,
                )
            )
        self._by_name = {h.name: h for h in self.hosts}
        self.time_scale = time_scale
        self.http = LoopbackServer(self._machine_named)  # what scripts on the hosts reach
        for name, host_faults in (faults or {}).items():
            for fault in host_faults:
                self.host(name).machine.set_fault(fault, True)
        self.started = False

    def _machine_named(self, name: str) -> Machine | None:
        host = self._by_name.get(name)
        return host.machine if host is not None else None

    def host(self, name: str) -> SimHost:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no simulated host {name!r} (have {', '.join(self.names)})") from None

    def port(self, name: str) -> int:
        return self.host(name).port

    def registration_info(self) -> list[SimHostInfo]:
        """Each host's name, port and key; before start() the ports are the planned ones, so
        `simfleet --register` can write the rows before it starts listening."""
        infos = [h.info() for h in self.hosts]
        if self.base_port is not None:
            infos = [
                SimHostInfo(i.name, i.port or self.base_port + n, i.public_key)
                for n, i in enumerate(infos)
            ]
        return infos

    async def start(self) -> None:
        if self.base_port is not None:
            await self._start_at(self.base_port)
        else:
            await self._start_anywhere()
        try:
            await self.http.start()
            for host in self.hosts:
                self.http.register(host.machine)
        except BaseException:
            await self.stop()
            raise
        self.started = True

    async def _start_at(self, base: int) -> None:
        try:
            await asyncio.gather(*(h.start(base + i) for i, h in enumerate(self.hosts)))
        except BaseException:
            await self.stop()
            raise

    async def _start_anywhere(self) -> None:
        """Find a free run of consecutive ports (tests may run side by side)."""
        count = len(self.hosts)
        rng = random.SystemRandom()
        last_error: OSError | None = None
        for _attempt in range(40):
            base = rng.randrange(_AUTO_PORT_LOW, _AUTO_PORT_HIGH - count)
            if not all(_port_free(self.bind, base + i) for i in range(count)):
                continue
            try:
                await self._start_at(base)
                self.base_port = base
                return
            except OSError as exc:
                last_error = exc
        raise OSError(f"no free run of {count} ports found") from last_error

    async def stop(self) -> None:
        await asyncio.gather(*(h.close() for h in self.hosts), return_exceptions=True)
        await self.http.close()
        self.started = False

    async def set_fault(
        self, name: str, fault: str, on: bool = True, models: Iterable[str] | None = None
    ) -> None:
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
        await self.host(name).set_fault(fault, on, models)

    async def run(
        self,
        name: str,
        command: str,
        *,
        stdin: str | None = None,
        username: str = "root",
    ) -> tuple[str, str, int]:
        """Run one command line on a host without SSH (for unit tests of the tools)."""
        host = self.host(name)
        host.machine.command_log.append(command)
        sink = shell.Sink()

        async def read() -> str:
            return stdin or ""

        session = shell.Session(
            host.machine,
            username=username,
            sink=sink,
            read_stdin=read,
            on_fault_change=host.fault_changed_remotely,
        )
        status = await shell.run(session, command)
        return "".join(sink.stdout), "".join(sink.stderr), status


async def serve_forever(fleet: SimFleet, stop: Callable[[], Awaitable[object]]) -> None:
    """Start the fleet, wait for `stop()` to return, then shut every listener down."""
    await fleet.start()
    try:
        await stop()
    finally:
        await fleet.stop()
