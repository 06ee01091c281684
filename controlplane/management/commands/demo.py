"""python manage.py demo: the whole product on one machine, in the foreground.

Migrates, creates the demo users, then runs a simulated fleet (registered), a Celery worker,
Celery beat and the web server as child processes until Ctrl-C.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser


def _reachable(url: str, timeout: float = 1.0) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection(
            (parsed.hostname or "127.0.0.1", parsed.port or 6379), timeout
        ):
            return True
    except OSError:
        return False


class Command(BaseCommand):
    help = "Run web, worker, beat and a simulated GPU fleet for a local demo."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--hosts", type=int, default=4)
        parser.add_argument("--base-port", type=int, default=2201)
        parser.add_argument("--bind", default="127.0.0.1:8000")

    def handle(self, *args: Any, **options: Any) -> None:
        run_dir = Path(settings.BASE_DIR) / ".run"
        run_dir.mkdir(exist_ok=True)
        env = dict(os.environ)
        if not _reachable(settings.CELERY_BROKER_URL):
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
        call_command("migrate", interactive=False, verbosity=0)
        call_command("demo_users", stdout=io.StringIO())
        py = sys.executable
        manage = str(Path(settings.BASE_DIR) / "manage.py")
        celery = str(Path(py).with_name("celery"))
        procs: list[tuple[str, subprocess.Popen[bytes]]] = []

        def start(name: str, argv: list[str]) -> subprocess.Popen[bytes]:
            proc = subprocess.Popen(argv, env=env, cwd=settings.BASE_DIR)
            procs.append((name, proc))
            return proc

        try:
            fleet = start(
                "fleet",
                [
                    py,
                    manage,
                    "simfleet",
                    "--hosts",
                    str(options["hosts"]),
                    "--base-port",
                    str(options["base_port"]),
                    "--register",
                ],
            )
            self._wait_for_port(options["base_port"] + options["hosts"] - 1, fleet)
            start("worker", [celery, "-A", "controlplane", "worker", "-l", "warning", "-c", "2"])
            start(
                "beat",
                [
                    celery,
                    "-A",
                    "controlplane",
                    "beat",
                    "-l",
                    "warning",
                    "-s",
                    str(run_dir / "celerybeat-schedule"),
                ],
            )
            start("web", [py, manage, "runserver", options["bind"], "--noreload"])
            self._banner(options["bind"])
            while all(p.poll() is None for _, p in procs):
                time.sleep(0.5)
            dead = [name for name, p in procs if p.poll() is not None]
            self.stderr.write(f"{', '.join(dead)} stopped; shutting the demo down.")
        except KeyboardInterrupt:
            self.stdout.write("\nStopping...")
        finally:
            for _, proc in reversed(procs):
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for _, proc in procs:
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()

    def _wait_for_port(self, port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit("the simulated fleet failed to start")
            if _reachable(f"tcp://127.0.0.1:{port}", 0.2):
                return
            time.sleep(0.2)
        raise SystemExit("the simulated fleet did not start listening in time")

    def _banner(self, bind: str) -> None:
        self.stdout.write(self.style.SUCCESS(f"\nControl plane: http://{bind}/"))
        self.stdout.write("Demo logins (user / password / role):")
        call_command("demo_users", stdout=self.stdout)
        self.stdout.write("Ctrl-C stops everything.\n")
