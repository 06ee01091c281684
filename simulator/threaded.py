"""A fleet on its own event loop thread, driven from synchronous code (pytest, bench scripts).

Every mutator hops onto the loop thread, so tests never race the SSH handlers that read the
same host state.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from . import catalog
from .server import SimFleet, SimHost, SimHostInfo
from .ssh_host import ConnectionRecord
from .state import Machine

T = TypeVar("T")


class HostHandle:
    """One host of a running fleet, for tests that work host by host."""

    def __init__(self, fleet: FleetHandle, host: SimHost) -> None:
        self._fleet = fleet
        self.name = host.name
        self.port = host.port
        self.address = fleet.address
        self.host_public_key = host.public_key()

    def __repr__(self) -> str:
        return f"<HostHandle {self.name} {self.address}:{self.port}>"

    def state(self) -> dict[str, Any]:
        return self._fleet.state(self.name)

    def command_log(self) -> list[str]:
        return self._fleet.command_log(self.name)

    def set_fault(self, fault: str, on: bool = True) -> None:
        self._fleet.set_fault(self.name, fault, on)

    def run(self, command: str, stdin: str | None = None) -> tuple[str, str, int]:
        return self._fleet.run(self.name, command, stdin=stdin)


class FleetHandle:
    """The synchronous face of a SimFleet running on a daemon thread."""

    def __init__(self, fleet: SimFleet, loop: asyncio.AbstractEventLoop) -> None:
        self.fleet = fleet
        self.loop = loop
        self.address = "127.0.0.1" if fleet.bind in ("0.0.0.0", "") else fleet.bind  # noqa: S104
        self.hosts = [HostHandle(self, h) for h in fleet.hosts]
        self._by_name = {h.name: h for h in self.hosts}
        self.client_key_path = fleet.client_key_path
        self.client_private_key = fleet.client_private_key
        self.client_public_key = fleet.client_public_key
        self.state_dir = fleet.state_dir
        self.time_scale = fleet.time_scale  # real seconds per simulated second

    # --- plumbing --------------------------------------------------------------------------

    def _await(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def _call(self, fn: Callable[[], T]) -> T:
        async def runner() -> T:
            return fn()

        return self._await(runner())

    def _machine(self, name: str) -> Machine:
        return self.fleet.host(name).machine

    # --- lookup ----------------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def host(self, name: str) -> HostHandle:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no simulated host {name!r}") from None

    def port(self, name: str) -> int:
        return self.host(name).port

    def host_public_key(self, name: str) -> str:
        """The host's own key (what registration pins), even while it presents a rotated one."""
        return self.host(name).host_public_key

    def presented_host_key(self, name: str) -> str:
        return self._call(lambda: self.fleet.host(name).presented_key())

    def registration_info(self) -> list[SimHostInfo]:
        return [SimHostInfo(h.name, h.port, h.host_public_key) for h in self.hosts]

    # --- faults and load -------------------------------------------------------------------

    def set_fault(
        self, name: str, fault: str, on: bool = True, models: Iterable[str] | None = None
    ) -> None:
        """Switch a fault; with `models`, it hits only those model paths (a bad build)."""
        self._await(self.fleet.set_fault(name, fault, on, models))

    def set_patched_engine(self, name: str, *, five_token_corruption: bool = True) -> None:
        """The `patched_file` fault, with the patch corrupting five-token prompts or not."""
        self.set_fault(name, "patched_file")
        self.set_fault(name, "five_token_corruption", five_token_corruption)

    @property
    def http_port(self) -> int:
        """The fleet's streaming HTTP server (simulator.http.loopback) on 127.0.0.1."""
        return self.fleet.http.port

    def set_foreign_memory(self, name: str, mib: int) -> None:
        """How much each `foreign_gpu_process` process holds on its GPU (default 4096 MiB)."""
        self._call(lambda: self._machine(name).set_foreign_memory(mib))

    def faults(self, name: str) -> set[str]:
        return self._call(lambda: set(self._machine(name).faults))

    def set_inflight(self, name: str, running: int, waiting: int = 0) -> None:
        """The load balancer's requests in flight on the host (they hold while it is in
        rotation, and finish once it is out: simulator.state.load)."""
        self._call(lambda: self._machine(name).set_inflight(running, waiting))

    def set_request_seconds(self, seconds: float, name: str | None = None) -> None:
        """How long each of the balancer's requests takes (host seconds, default 20)."""

        def apply() -> None:
            for machine in self._each(name):
                machine.load.request_seconds = seconds

        self._call(apply)

    def in_rotation(self, name: str) -> bool:
        return self._call(lambda: self._machine(name).load.in_rotation)

    def _each(self, name: str | None) -> list[Machine]:
        return [self._machine(name)] if name else [h.machine for h in self.fleet.hosts]

    def set_load_seconds(self, seconds: float, name: str | None = None) -> None:
        def apply() -> None:
            for machine in self._each(name):
                machine.load_seconds = seconds

        self._call(apply)

    def set_clock_skew(self, seconds: float, name: str | None = None) -> None:
        """The hosts' wall clock runs `seconds` ahead of this machine's (negative: behind), as
        on a host whose NTP stopped: the timestamps systemd and the journal print. Their
        monotonic clocks (loads, generation) are untouched."""

        def apply() -> None:
            for machine in self._each(name):
                machine.wall = lambda: time.time() + seconds

        self._call(apply)

    def set_slow_seconds(self, seconds: float, name: str | None = None) -> None:
        def apply() -> None:
            for machine in self._each(name):
                machine.slow_seconds = seconds

        self._call(apply)

    def set_integrity(
        self,
        name: str,
        *,
        modified: Iterable[str] = (),
        missing: Iterable[str] = (),
        added: Iterable[str] = (),
    ) -> None:
        def apply() -> None:
            machine = self._machine(name)
            machine.integrity_modified = list(modified)
            machine.integrity_missing = list(missing)
            machine.integrity_added = list(added)

        self._call(apply)

    # --- the truth -------------------------------------------------------------------------

    def state(self, name: str) -> dict[str, Any]:
        """A deep copy of the host's state now: compare it with what the control plane parsed."""
        return self._call(lambda: self._machine(name).snapshot())

    def command_log(self, name: str) -> list[str]:
        return self._call(lambda: list(self._machine(name).command_log))

    def clear_command_log(self, name: str | None = None) -> None:
        def apply() -> None:
            for machine in self._each(name):
                machine.command_log.clear()

        self._call(apply)

    def connection_log(self, name: str) -> list[ConnectionRecord]:
        """What each SSH client asked of the host: keys offered, forwarding wanted (copies)."""
        return self._call(lambda: [copy.deepcopy(r) for r in self.fleet.host(name).connection_log])

    def clear_connection_log(self, name: str | None = None) -> None:
        def apply() -> None:
            for host in [self.fleet.host(name)] if name else self.fleet.hosts:
                host.connection_log.clear()

        self._call(apply)

    def journal(self, name: str, unit: str = catalog.DEFAULT_UNIT) -> list[str]:
        return self._call(
            lambda: [e.message for e in self._machine(name).journal_lines([unit], None)]
        )

    def run(
        self, name: str, command: str, *, stdin: str | None = None, username: str = "root"
    ) -> tuple[str, str, int]:
        """Run a command line in-process (no SSH): (stdout, stderr, exit status)."""
        return self._await(self.fleet.run(name, command, stdin=stdin, username=username))

    # --- out-of-band changes: drift the control plane did not cause ------------------------

    def _unit_op(self, name: str, unit: str, op: Callable[[Machine, Any], None]) -> None:
        def apply() -> None:
            machine = self._machine(name)
            found = machine.lookup_unit(unit)
            if found is None:
                raise KeyError(f"{name} has no unit {unit!r}")
            op(machine, found)

        self._call(apply)

    def restart_unit(self, name: str, unit: str = catalog.DEFAULT_UNIT) -> None:
        """Someone restarted the unit behind the control plane's back: new MainPID."""
        self._unit_op(name, unit, lambda m, u: m.restart(u))

    def start_unit(self, name: str, unit: str = catalog.DEFAULT_UNIT) -> None:
        self._unit_op(name, unit, lambda m, u: m.start(u))

    def stop_unit(self, name: str, unit: str = catalog.DEFAULT_UNIT) -> None:
        self._unit_op(name, unit, lambda m, u: m.stop(u))

    def crash_unit(self, name: str, unit: str = catalog.DEFAULT_UNIT) -> None:
        """The engine dies on its own; the unit's Restart= policy decides what happens next."""
        self._unit_op(name, unit, lambda m, u: m.kill(u))

    def set_unit_file(
        self,
        name: str,
        unit: str,
        content: str,
        *,
        reload: bool = False,
    ) -> None:
        def apply() -> None:
            machine = self._machine(name)
            machine.write_file(machine.unit_path(unit), content)
            if reload:
                machine.daemon_reload()

        self._call(apply)

    def remove_unit_file(self, name: str, unit: str, *, reload: bool = False) -> None:
        def apply() -> None:
            machine = self._machine(name)
            machine.remove_file(machine.unit_path(unit))
            if reload:
                machine.daemon_reload()

        self._call(apply)

    def daemon_reload(self, name: str) -> None:
        self._call(lambda: self._machine(name).daemon_reload())

    def write_file(self, name: str, path: str, content: str | None) -> None:
        """Put a file on the host (a --config YAML, a chat template); None removes it."""

        def apply() -> None:
            machine = self._machine(name)
            if content is None:
                machine.remove_file(path)
            else:
                machine.write_file(path, content)

        self._call(apply)

    def processes(self, name: str) -> dict[int, str | None]:
        """Every process on the host with its unit or scope (None: none), as `ps` would see it."""
        return self._call(lambda: {p.pid: p.unit for p in self._machine(name).processes()})

    def set_disk_model(self, name: str, path: str, weights_gib: float | None) -> None:
        """Put a model directory on the host's disk (None removes it)."""

        def apply() -> None:
            disk = self._machine(name).disk
            if weights_gib is None:
                disk.pop(path, None)
            else:
                disk[path] = weights_gib

        self._call(apply)

    def wait_for(
        self,
        name: str,
        predicate: Callable[[dict[str, Any]], bool],
        *,
        timeout: float = 10.0,
        interval: float = 0.02,
    ) -> dict[str, Any]:
        """Poll the host's state until `predicate(state)` holds; returns that state."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.state(name)
            if predicate(state):
                return state
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name}: condition not met within {timeout} s")
            time.sleep(interval)

    def wait_for_unit(
        self,
        name: str,
        unit: str = catalog.DEFAULT_UNIT,
        phase: str | Iterable[str] = "ready",
        *,
        timeout: float = 10.0,
    ) -> dict[str, Any]:
        """Wait until a unit is loading/ready/failed/stopped (see simulator.state.snapshot)."""
        phases = {phase} if isinstance(phase, str) else set(phase)
        state = self.wait_for(
            name,
            lambda s: s["units"].get(unit, {}).get("phase") in phases,
            timeout=timeout,
        )
        return dict(state["units"][unit])


@contextlib.contextmanager
def running_fleet(
    n: int = 2,
    *,
    base_port: int | None = None,
    load_seconds: float = 0.2,
    slow_seconds: float = 5.0,
    state_dir: str | Path | None = None,
    faults: Mapping[str, Iterable[str]] | None = None,
    bind: str = "127.0.0.1",
    unit_styles: Mapping[str, str] | None = None,
    time_scale: float = 1.0,
    hardware: Mapping[str, str] | None = None,
) -> Iterator[FleetHandle]:
    """Run `n` simulated hosts on a daemon thread for the duration of the block.

    `unit_styles={"gpu-01": "envfile"}` boots gpu-01 with the hand-written unit shape (model
    from an EnvironmentFile= through ${VAR}); the others keep the control plane's shape.
    `time_scale=0.01` runs every host's clock a hundred times faster (loads, generation, pip).
    `hardware={"gpu-02": "h200"}` makes gpu-02 an 8 x H200 host (simulator.state.hardware);
    the others keep the default, 8 x RTX PRO 6000.
    """
    temp_dir = None
    if state_dir is None:
        temp_dir = tempfile.mkdtemp(prefix="simfleet-")
        state_dir = temp_dir
    fleet = SimFleet(
        n,
        base_port=base_port,
        bind=bind,
        state_dir=state_dir,
        load_seconds=load_seconds,
        slow_seconds=slow_seconds,
        faults=faults,
        unit_styles=unit_styles,
        time_scale=time_scale,
        hardware=hardware,
    )
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="simfleet", daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(fleet.start(), loop).result(120)
        yield FleetHandle(fleet, loop)
    finally:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(fleet.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        if not loop.is_running():
            loop.close()
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)
