"""Fault 6: `manage.py demo` stopped the way Docker and systemd stop it.

The demo runs as a real command (a one-host fleet, a worker with its pool, beat and the web
server) in a run directory of the test's own (DEMO_RUN_DIR), on free ports, the test database
and a Redis of the test's own. It is stopped with SIGTERM sent to it alone (`docker stop`),
started again at once in the same directory, and that one stopped with SIGINT sent to its whole
process group (Ctrl-C in a terminal; systemd's default KillMode=control-group signals every
process of the unit the same way). After each stop nothing it started may still run: checked
in /proc, by process tree, by process group and by a marker in the environment, which an
orphan keeps even when it is re-parented.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.conftest import RedisServer, answers, free_port
from tests.waiting import wait_until
from tests.workers import ROOT, _database_url

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

# --- /proc, without psutil ------------------------------------------------------------------


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgrp: int
    state: str
    start: int  # clock ticks after boot: with the pid, names one process even if pids recycle
    name: str


def _stat(pid: int) -> Proc | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    name = raw[raw.index("(") + 1 : raw.rindex(")")]
    fields = raw[raw.rindex(")") + 2 :].split()
    # fields[0] is field 3 of proc(5): state, ppid, pgrp, ..., starttime is field 22
    return Proc(pid, int(fields[1]), int(fields[2]), fields[0], int(fields[19]), name)


def processes() -> list[Proc]:
    found = (_stat(int(entry)) for entry in os.listdir("/proc") if entry.isdigit())
    return [p for p in found if p is not None]


def descendants(root: int) -> list[Proc]:
    table = processes()
    tree, frontier = [], {root}
    while frontier:
        children = [p for p in table if p.ppid in frontier]
        tree += children
        frontier = {p.pid for p in children}
    return tree


def running(proc: Proc) -> bool:
    now = _stat(proc.pid)
    return now is not None and now.start == proc.start and now.state not in ("Z", "X")


def marked(marker: str) -> list[Proc]:
    """Every live process whose environment carries `marker` (children inherit it)."""
    needle = marker.encode()
    found = []
    for proc in processes():
        try:
            environ = Path(f"/proc/{proc.pid}/environ").read_bytes()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if needle in environ and proc.state not in ("Z", "X"):
            found.append(proc)
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except (FileNotFoundError, ProcessLookupError):
        return ""


# --- the demo ----------------------------------------------------------------------------------


class Demo:
    def __init__(self, run_dir: Path, redis: RedisServer) -> None:
        self.run_dir = run_dir
        self.web_port = free_port()
        self.fleet_port = free_port()
        self.marker = f"CHAOS_DEMO={uuid.uuid4().hex}"
        self.env = dict(
            os.environ,
            DEMO_RUN_DIR=str(run_dir),
            DATABASE_URL=_database_url(),
            CELERY_BROKER_URL=redis.url,
            REDIS_URL=redis.url,
            AUDIT_CHECKPOINT_DIR=str(run_dir / "audit-checkpoints"),
            STATIC_ROOT=str(run_dir / "static"),
            CHAOS_DEMO=self.marker.split("=", 1)[1],
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def start(self) -> subprocess.Popen[bytes]:
        self.runs += 1
        log = (self.run_dir / f"demo-{self.runs}.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "demo", "--hosts", "1",
             "--base-port", str(self.fleet_port), "--bind", f"127.0.0.1:{self.web_port}"],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as under a terminal or a unit
        )  # fmt: skip
        wait_until(
            lambda: (
                self.proc is not None and (self.proc.poll() is not None or answers(self.web_port))
            ),
            timeout=90,
            interval=0.2,
            explain=self.output,
        )
        assert self.proc.poll() is None, self.output()
        assert answers(self.fleet_port), self.output()
        return self.proc

    def output(self) -> str:
        path = self.run_dir / f"demo-{self.runs}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def children(self) -> dict[str, list[Proc]]:
        """What the demo runs now, by role (a worker has pool processes of its own)."""
        assert self.proc is not None
        roles: dict[str, list[Proc]] = {}
        for proc in descendants(self.proc.pid):
            line = cmdline(proc.pid)
            role = next(
                (r for r in ("simfleet", "worker", "beat", "runserver") if r in line), "other"
            )
            roles.setdefault(role, []).append(proc)
        return roles

    def kill_everything(self) -> None:
        for proc in marked(self.marker):
            with _gone():
                os.kill(proc.pid, signal.SIGKILL)


class _gone:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, *_: Any) -> bool:
        return kind is ProcessLookupError


@pytest.fixture
def demo(tmp_path: Path, redis_server: RedisServer, transactional_db: None) -> Iterator[Demo]:
    started = Demo(tmp_path / "run", redis_server)
    started.run_dir.mkdir()
    try:
        yield started
    finally:
        started.kill_everything()  # only if the test failed half-way


def _stop_and_check(demo: Demo, how: str) -> None:
    assert demo.proc is not None

    def up() -> bool:
        roles = demo.children()
        # the worker with its pool of two, beat, the fleet and the web server
        return len(roles.get("worker", [])) >= 3 and {"simfleet", "beat", "runserver"} <= set(roles)

    wait_until(up, timeout=60, interval=0.2, explain=lambda: (demo.children(), demo.output()))
    tree = [p for procs in demo.children().values() for p in procs]
    if how == "SIGTERM to the demo":
        demo.proc.send_signal(signal.SIGTERM)  # docker stop
    else:
        os.killpg(demo.proc.pid, signal.SIGINT)  # Ctrl-C; systemd's control-group kill
    code = demo.proc.wait(60)
    assert code == 0, (code, demo.output())
    assert "Stopping..." in demo.output()
    left = [p for p in tree if running(p)]
    assert left == [], [(p.pid, cmdline(p.pid)) for p in left]
    group = [p for p in processes() if p.pgrp == demo.proc.pid and p.state not in ("Z", "X")]
    assert group == [], [(p.pid, cmdline(p.pid)) for p in group]
    assert marked(demo.marker) == [], [(p.pid, cmdline(p.pid)) for p in marked(demo.marker)]
    assert not list(demo.run_dir.glob("*.pid")), list(demo.run_dir.iterdir())


def test_the_demo_stops_whole_and_starts_again_at_once(demo: Demo) -> None:
    demo.start()
    _stop_and_check(demo, "SIGTERM to the demo")
    # Straight away, in the same run directory, on the same ports: no lock, pid file or port
    # left behind stops it.
    demo.start()
    _stop_and_check(demo, "SIGINT to its process group")
