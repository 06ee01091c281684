"""python manage.py simfleet: simulated GPU hosts as SSH servers, until interrupted.

The simulator is a rehearsal tool that production does not install (the product's wheel and
image leave it out): there the command refuses in words instead of failing to load."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from hosts.sudoers import SUDOERS_PATH, EngineInstall, sudoers_entry

NOT_INSTALLED = (
    "the simulator is not installed in this environment (it is a rehearsal tool; install the "
    "project from its source tree with `make install`)"
)

try:
    from simulator import catalog
    from simulator.server import SimFleet, host_names
    from simulator.state import (
        DEFAULT_HARDWARE,
        DEFAULT_LOAD_SECONDS,
        DEFAULT_SLOW_SECONDS,
        FAULTS,
        HARDWARE_PROFILES,
    )
except ModuleNotFoundError as exc:
    if exc.name != "simulator":  # the simulator is there but broken: show where
        raise
    SIMULATOR_INSTALLED = False
else:
    SIMULATOR_INSTALLED = True

SUDO_USER = "root"  # deployments.simfleet_registration registers every host as root
ENGINE_PYTHON = "/opt/vllm/.venv/bin/python3"  # the engine's Python on every simulated host


def _sudoers_entry() -> str:
    """The entry an operator installs on each host (hosts.sudoers), for the user the fleet is
    registered as. The hosts refuse, as sudo does, whatever it does not allow, so the demo runs
    on the same terms as a real host set up as docs/operations/hosts.md says."""
    engines = [
        EngineInstall(python=ENGINE_PYTHON, version=catalog.VLLM_VERSION, source=source)
        for source in ("", catalog.WHEEL_DIR)
    ]
    return sudoers_entry(user=SUDO_USER, environment_files=[catalog.ENV_FILE], engines=engines)


def _parse_faults(values: list[str], names: list[str]) -> dict[str, list[str]]:
    faults: dict[str, list[str]] = {}
    for value in values:
        name, sep, fault = value.partition("=")
        if not sep or name not in names or fault not in FAULTS:
            raise CommandError(
                f"--fault {value!r}: use HOST=FAULT with a host of this fleet (e.g. {names[0]}) "
                f"and one of: {', '.join(FAULTS)}"
            )
        faults.setdefault(name, []).append(fault)
    return faults


def _parse_hardware(values: list[str], names: list[str]) -> dict[str, str]:
    """`--hardware HOST=PROFILE`, repeatable: each named host's profile (once per host)."""
    hardware: dict[str, str] = {}
    for value in values:
        name, sep, key = value.partition("=")
        if not sep or name not in names or key not in HARDWARE_PROFILES:
            raise CommandError(
                f"--hardware {value!r}: use HOST=PROFILE with a host of this fleet (e.g. "
                f"{names[-1]}) and one of: {', '.join(HARDWARE_PROFILES)}"
            )
        if hardware.get(name, key) != key:
            raise CommandError(f"--hardware: {name} has two profiles ({hardware[name]}, {key})")
        hardware[name] = key
    return hardware


class Command(BaseCommand):
    help = (
        "Run N simulated GPU inference hosts (8 x RTX PRO 6000 unless --hardware says "
        "otherwise) as SSH servers on consecutive ports (gpu-01 on --base-port, gpu-02 on the "
        "next, ...) until interrupted."
    )
    if not SIMULATOR_INSTALLED:
        help += f" Unavailable here: {NOT_INSTALLED}."

    def run_from_argv(self, argv: list[str]) -> None:
        if not SIMULATOR_INSTALLED:  # before parsing: the options' defaults are the simulator's
            self.stderr.write(f"CommandError: {NOT_INSTALLED}")
            sys.exit(1)
        super().run_from_argv(argv)

    def add_arguments(self, parser: CommandParser) -> None:
        if not SIMULATOR_INSTALLED:
            return
        parser.add_argument("--hosts", type=int, default=4, help="number of hosts (default 4)")
        parser.add_argument("--base-port", type=int, default=2201, help="port of the first host")
        parser.add_argument(
            "--bind", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
        )
        parser.add_argument(
            "--address",
            default="",
            help="address the control plane should use for the hosts when registering "
            "(default: the bind address, or 127.0.0.1 when binding all interfaces)",
        )
        parser.add_argument(
            "--register",
            action="store_true",
            help="add the hosts, their credential, pinned keys, the model catalog and one "
            "deployment per host to the database (idempotent)",
        )
        parser.add_argument(
            "--history-hours",
            type=float,
            default=0,
            help="with --register: give each host that has no past this many hours of GPU "
            "history (seeded snapshots with the readings of a typical day), so its charts are "
            "not empty; the demo asks for 24 (default 0: none)",
        )
        parser.add_argument(
            "--state-dir",
            default="",
            help="where host keys and the client key live (default .run/simfleet/)",
        )
        parser.add_argument(
            "--load-seconds",
            type=float,
            default=DEFAULT_LOAD_SECONDS,
            help=f"how long a model takes to load (default {DEFAULT_LOAD_SECONDS:g})",
        )
        parser.add_argument(
            "--slow-seconds",
            type=float,
            default=DEFAULT_SLOW_SECONDS,
            help="delay per command on hosts with the slow fault "
            f"(default {DEFAULT_SLOW_SECONDS:g})",
        )
        parser.add_argument(
            "--time-scale",
            type=float,
            default=1.0,
            help="real seconds per simulated second: 0.01 runs loads, generation and pip 100x "
            "faster (default 1: as fast as the real hosts the simulator models)",
        )
        parser.add_argument(
            "--fault",
            action="append",
            default=[],
            metavar="HOST=FAULT",
            help=f"start with a fault switched on; repeatable. Faults: {', '.join(FAULTS)}",
        )
        parser.add_argument(
            "--hardware",
            action="append",
            default=[],
            metavar="HOST=PROFILE",
            help="what a host's GPUs are; repeatable (default "
            f"{DEFAULT_HARDWARE.key}). Profiles: {', '.join(HARDWARE_PROFILES)}",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not SIMULATOR_INSTALLED:
            raise CommandError(NOT_INSTALLED)
        count = options["hosts"]
        base_port = options["base_port"]
        if count < 1:
            raise CommandError("--hosts must be at least 1")
        if options["history_hours"] and not options["register"]:
            raise CommandError("--history-hours needs --register (it writes to the database)")
        if not 0 <= options["history_hours"] <= 24 * 7:
            raise CommandError("--history-hours must be 0 to 168 (a week)")
        if not 0 < options["time_scale"] <= 100:
            raise CommandError("--time-scale must be above 0 and at most 100")
        if not base_port >= 1 or base_port + count - 1 > 65535:
            raise CommandError("--base-port leaves no room for that many hosts")
        names = host_names(count)
        faults = _parse_faults(options["fault"], names)
        hardware = _parse_hardware(options["hardware"], names)
        state_dir = Path(options["state_dir"] or Path(settings.BASE_DIR) / ".run" / "simfleet")
        bind = options["bind"]
        address = options["address"] or ("127.0.0.1" if bind in ("0.0.0.0", "") else bind)  # noqa: S104
        started = time.monotonic()
        fleet = SimFleet(
            count,
            base_port=base_port,
            bind=bind,
            state_dir=state_dir,
            load_seconds=options["load_seconds"],
            slow_seconds=options["slow_seconds"],
            faults=faults,
            time_scale=options["time_scale"],
            hardware=hardware,
        )
        entry = _sudoers_entry()
        for host in fleet.hosts:
            host.machine.write_file(SUDOERS_PATH, entry)
        if options["register"]:
            from deployments.simfleet_registration import register_fleet

            rows = register_fleet(
                fleet.registration_info(),
                client_private_key=fleet.client_private_key,
                address=address,
            )
            self.stdout.write(f"simfleet: registered {len(rows)} hosts (credential 'simfleet')")
            if options["history_hours"] > 0:
                from deployments.simfleet_registration import seed_gpu_history

                seeded = seed_gpu_history(fleet.hosts, hours=options["history_hours"])
                if seeded:
                    self.stdout.write(
                        f"simfleet: seeded {options['history_hours']:g} h of GPU history "
                        f"({seeded} snapshots) for the charts"
                    )
        try:
            asyncio.run(self._serve(fleet, started))
        except OSError as exc:
            raise CommandError(f"cannot listen: {exc}") from exc

    async def _serve(self, fleet: SimFleet, started: float) -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await fleet.start()
        first, last = fleet.hosts[0], fleet.hosts[-1]
        self.stdout.write(
            f"simfleet: {len(fleet.hosts)} hosts ({first.name}..{last.name}) listening on "
            f"{fleet.bind}:{first.port}-{last.port}, ready in {time.monotonic() - started:.2f} s"
        )
        self.stdout.write(
            f"simfleet: try `ssh -i {fleet.client_key_path} -p {first.port} "
            f"-o StrictHostKeyChecking=no root@127.0.0.1 simctl status`; Ctrl-C stops"
        )
        self.stdout.flush()
        try:
            await stop.wait()
        finally:
            self.stdout.write("simfleet: shutting down")
            await fleet.stop()
