"""python manage.py demo: the whole product on one machine, in the foreground.

Migrates, creates the demo users and host groups, then runs a simulated fleet (registered, its
hosts put in the groups `prod` and `team-a`), a Celery worker, Celery beat and the web server
as child processes until Ctrl-C or SIGTERM (as Docker and systemd stop it). Every child stops
with it, even if the demo itself is killed, and a second demo in the same project refuses to
start while the first one runs.

What it keeps between runs (its lock, the fleet's keys, beat's schedule and pid file, the
fallback broker) lives in `.run/`, or in DEMO_RUN_DIR when that is set.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import importlib.util
import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import IO, Any
from urllib.parse import urlparse

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a child gets when its parent dies
# The demo fleet's hosts that are not 8 x RTX PRO 6000 (simfleet --hardware): one HGX H200
# board, whose 141 GB GPUs hold the Kimi-K2.5 NVFP4 every host is deployed with. (An H100's 80
# GB would not hold it at tensor-parallel 8, nor would four L40S.)
DEMO_HARDWARE = {2: "h200"}  # host number -> profile
DEMO_HISTORY_HOURS = 24


def demo_hardware(hosts: int) -> list[str]:
    """`HOST=PROFILE` for each of the demo's hosts with other hardware than the default."""
    width = 3 if hosts > 99 else 2  # as simfleet names them
    return [f"gpu-{n:0{width}d}={key}" for n, key in DEMO_HARDWARE.items() if n <= hosts]


def _reachable(url: str, timeout: float = 1.0) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection(
            (parsed.hostname or "127.0.0.1", parsed.port or 6379), timeout
        ):
            return True
    except OSError:
        return False


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the demo dies, however it dies (Linux)."""
    # Not Linux: no prctl, and the demo's own SIGTERM handler still stops its children.
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _simulator_installed() -> bool:
    """Whether `simfleet` can run here: the simulator is looked for, not imported (the product
    never imports it; production installs leave it out)."""
    try:
        return importlib.util.find_spec("simulator") is not None
    except ImportError:  # a finder that refuses it
        return False


class _Stop(Exception):
    """SIGTERM or SIGINT reached the demo."""


class Command(BaseCommand):
    help = "Run web, worker, beat and a simulated GPU fleet for a local demo."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--hosts", type=int, default=4)
        parser.add_argument("--base-port", type=int, default=2201)
        parser.add_argument("--bind", default="127.0.0.1:8000")

    def handle(self, *args: Any, **options: Any) -> None:
        if not _simulator_installed():
            raise CommandError(
                "the demo runs a simulated fleet, and the simulator is not installed in this "
                "environment (it is a rehearsal tool; install the project from its source tree "
                "with `make install`)"
            )
        run_dir = Path(os.environ.get("DEMO_RUN_DIR") or Path(settings.BASE_DIR) / ".run")
        run_dir.mkdir(parents=True, exist_ok=True)
        lock = self._single_instance(run_dir)
        try:
            _require_ports_free(options)
        except CommandError:
            lock.close()
            raise
        env = self._environment(run_dir)
        call_command("migrate", interactive=False, verbosity=0)
        call_command("demo_users", stdout=io.StringIO())
        procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            for name, argv in self._children(run_dir, options):
                procs.append(
                    (
                        name,
                        subprocess.Popen(
                            argv, env=env, cwd=settings.BASE_DIR, preexec_fn=_die_with_parent
                        ),
                    )
                )
                if name == "fleet":
                    self._wait_for_port(options["base_port"] + options["hosts"] - 1, procs[-1][1])
            self._banner(options["bind"])
            while all(p.poll() is None for _, p in procs):
                time.sleep(0.5)
            dead = [name for name, p in procs if p.poll() is not None]
            self.stderr.write(f"{', '.join(dead)} stopped; shutting the demo down.")
        except (_Stop, KeyboardInterrupt):
            self.stdout.write("\nStopping...")
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            _stop_all(procs)
            lock.close()

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        raise _Stop(signal.Signals(signum).name)

    def _single_instance(self, run_dir: Path) -> IO[str]:
        """Hold an exclusive lock on .run/demo.lock for as long as this demo runs."""
        lock = (run_dir / "demo.lock").open("a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            lock.close()
            raise CommandError(
                "another demo is already running in this project (stop it first: Ctrl-C or "
                "SIGTERM); two would share the fleet's ports and one beat schedule"
            ) from exc
        lock.seek(0)
        lock.truncate()
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        return lock

    def _environment(self, run_dir: Path) -> dict[str, str]:
        env = dict(os.environ)
        if _reachable(settings.CELERY_BROKER_URL):
            return env
        broker_dir = run_dir / "broker"
        broker_dir.mkdir(exist_ok=True)
        env["CELERY_BROKER_URL"] = "filesystem://"
        env["CELERY_BROKER_TRANSPORT_OPTIONS"] = json.dumps(
            {
                "data_folder_in": str(broker_dir),
                "data_folder_out": str(broker_dir),
                "control_folder": str(broker_dir / "control"),
            }
        )
        self.stdout.write(
            self.style.WARNING(
                f"Redis is not reachable at {settings.CELERY_BROKER_URL}: using a file-system "
                f"broker in {broker_dir} instead (fine for one machine, not for production)."
            )
        )
        return env

    def _children(self, run_dir: Path, options: dict[str, Any]) -> list[tuple[str, list[str]]]:
        py = sys.executable
        manage = str(Path(settings.BASE_DIR) / "manage.py")
        celery = str(Path(py).with_name("celery"))
        fleet = [
            py,
            manage,
            "simfleet",
            "--hosts",
            str(options["hosts"]),
            "--base-port",
            str(options["base_port"]),
            "--register",
            "--state-dir",
            str(run_dir / "simfleet"),
            # A day of GPU history, so the host charts show what they are for at once.
            "--history-hours",
            str(DEMO_HISTORY_HOURS),
        ]
        fleet += [f"--hardware={host}" for host in demo_hardware(options["hosts"])]
        # No --pidfile: the demo's lock already keeps beat single. A beat stopped by two
        # signals at once (Ctrl-C reaches the whole group, then the demo's SIGTERM) can leave
        # its pid file behind, and a later beat refuses to start if that pid is in use again.
        beat = [
            celery,
            "-A",
            "controlplane",
            "beat",
            "-l",
            "warning",
            "-s",
            str(run_dir / "celerybeat-schedule"),
        ]
        return [
            ("fleet", fleet),
            ("worker", [celery, "-A", "controlplane", "worker", "-l", "warning", "-c", "2"]),
            ("beat", beat),
            ("web", [py, manage, "runserver", options["bind"], "--noreload"]),
        ]

    def _wait_for_port(self, port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise CommandError("the simulated fleet failed to start")
            if _reachable(f"tcp://127.0.0.1:{port}", 0.2):
                return
            time.sleep(0.2)
        raise CommandError("the simulated fleet did not start listening in time")

    def _banner(self, bind: str) -> None:
        self.stdout.write(self.style.SUCCESS(f"\nControl plane: http://{bind}/"))
        self.stdout.write("Demo logins (user / password / role):")
        # Again now that the fleet is registered: this also puts its hosts in their groups.
        call_command("demo_users", stdout=self.stdout)
        self.stdout.write("Ctrl-C stops everything.\n")


def _port_taken(host: str, port: int) -> bool:
    """Whether something already listens on host:port (binding it is refused)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # SO_REUSEADDR as the servers set it: a port held only by TIME_WAIT sockets is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def _require_ports_free(options: dict[str, Any]) -> None:
    """Refuse, saying what to run instead, when the web port or a host's SSH port is taken:
    otherwise a child fails a moment later with a traceback about an address in use."""
    host, _, port_text = str(options["bind"]).rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        raise CommandError(f"--bind takes HOST:PORT, not {options['bind']!r}") from None
    if not 1 <= port <= 65535:
        raise CommandError(f"--bind's port must be 1 to 65535, not {port}")
    if not 1 <= options["hosts"] <= 999:
        raise CommandError(f"the demo runs 1 to 999 simulated hosts, not {options['hosts']}")
    if _port_taken(host, port):
        raise CommandError(
            f"port {port} on {host} is taken (another `make run`, or another server): stop it, "
            f"or pick another port, e.g. `make run PORT={port + 80}`"
        )
    first = options["base_port"]
    taken = [p for p in range(first, first + options["hosts"]) if _port_taken("127.0.0.1", p)]
    if taken:
        raise CommandError(
            f"the simulated hosts' SSH ports {first}..{first + options['hosts'] - 1} are not all "
            f"free ({', '.join(map(str, taken[:5]))} taken): stop what holds them, or move the "
            f"fleet, e.g. `make run FLEET_PORT={first + 100}`"
        )


def _stop_all(procs: list[tuple[str, subprocess.Popen[bytes]]]) -> None:
    """SIGTERM every child that still runs (web first, fleet last), then wait; SIGKILL what
    does not stop within ten seconds."""
    for _, proc in reversed(procs):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for _, proc in procs:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
