"""What the fault suite injects faults with: a Redis server of its own, the test process's
Celery app pointed at it, and a gate on the audit chain's lock that stops a worker at an exact
point of a job.

Every fault is a real one (a process killed, a server restarted, a connection terminated, a
lock held): nothing here mocks the database, the broker, SSH or the browser.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.test import Client

from controlplane.celery import app
from tests.waiting import wait_until
from tests.workers import WorkerProcess, private_worker

# --- ports and processes --------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers(port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout):
            return True
    except OSError:
        return False


# --- pages, as a browser asks for them ---------------------------------------------------------


def session_for(user: Any) -> str:
    """A signed-in session (stored in the test database, which the live server reads)."""
    client = Client()
    client.force_login(user)
    return str(client.cookies[settings.SESSION_COOKIE_NAME].value)


def http_get(url: str, session: str, accept: str = "text/html") -> tuple[int, str, str]:
    """GET over real HTTP: (status, content type, body), error statuses included."""
    headers = {"Cookie": f"{settings.SESSION_COOKIE_NAME}={session}", "Accept": accept}
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            kind = response.headers.get("Content-Type", "")
            return response.status, kind, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read().decode()


# --- a Redis server of the test's own ----------------------------------------------------------


class RedisServer:
    """`redis-server` on a free port, without persistence (as docker-compose runs it): a
    restart loses every message it held, which is the fault."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("the fault suite needs redis-server (Debian: redis-server)")
        self.binary = binary
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.workdir), "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_until(lambda: answers(self.port), timeout=10, explain=lambda: "redis-server")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        wait_until(lambda: not answers(self.port), timeout=10)

    def tasks(self, queue: str) -> list[tuple[str, str]]:
        """The (task name, arguments) of the messages waiting in `queue`: under Celery's redis
        transport a queue is a Redis list of JSON envelopes, protocol 2 headers inside."""
        out = subprocess.run(
            ["redis-cli", "-p", str(self.port), "--raw", "LRANGE", queue, "0", "-1"],
            capture_output=True, check=True, text=True,
        )  # fmt: skip
        waiting = []
        for line in out.stdout.splitlines():
            if line.strip():
                headers = json.loads(line).get("headers", {})
                waiting.append((headers.get("task", ""), headers.get("argsrepr", "")))
        return waiting


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def broker(url: str) -> Iterator[None]:
    """Point the test process's Celery app at `url`: what the product enqueues from here (on a
    request's commit) goes to that broker. Celery caches its connection and producer pools on
    first use, so both are dropped on the way in and out."""

    def drop_pools() -> None:
        app._pool = None
        app.amqp._producer_pool = None

    previous = app.conf.broker_url
    app.conf.broker_url = url
    drop_pools()
    try:
        yield
    finally:
        app.conf.broker_url = previous
        drop_pools()


@pytest.fixture
def chaos_workers(
    redis_server: RedisServer, transactional_db: None, tmp_path: Path
) -> Iterator[Callable[..., WorkerProcess]]:
    """`start(beat=False, **env)`: a worker of the test's own on the test's Redis (and the test
    process's Celery app pointed there: even a parked message never reaches a shared broker).
    Audit checkpoints go to tmp_path/checkpoints, where `verify_audit` looks in these tests."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(broker(redis_server.url))
        started: list[WorkerProcess] = []

        def start(*, beat: bool = False, **env: str) -> WorkerProcess:
            n = len(started) + 1
            worker = stack.enter_context(
                private_worker(
                    f"chaos-{n}", tmp_path / f"worker-{n}.log", beat=beat,
                    CELERY_BROKER_URL=redis_server.url,
                    AUDIT_CHECKPOINT_DIR=str(tmp_path / "checkpoints"), **env,
                )
            )  # fmt: skip
            started.append(worker)
            return worker

        yield start


@pytest.fixture
def chaos_worker(chaos_workers: Callable[..., WorkerProcess]) -> WorkerProcess:
    return chaos_workers()


# --- PostgreSQL ---------------------------------------------------------------------------------


def dsn(database: str | None = None) -> str:
    """A libpq connection string for the test database (or `database` on the same server)."""
    db = connection.settings_dict
    return (
        f"host={db.get('HOST') or '127.0.0.1'} port={db.get('PORT') or 5432} "
        f"user={db.get('USER') or 'postgres'} dbname={database or db['NAME']}"
    )


def require_postgresql() -> None:
    if connection.vendor != "postgresql":
        raise RuntimeError(
            "the fault suite needs PostgreSQL: set DATABASE_URL=postgres://postgres@127.0.0.1"
            ":5432/<name> (it holds row locks and terminates connections)"
        )


class AuditGate:
    """Stops a worker at an exact point of a job, with the lock every audit append takes.

    `_append` (controlplane.audit.services) locks the audit chain's head row before it writes
    an event. The gate holds that row lock from a connection of its own, so the next append,
    whoever makes it, waits. `step()` lets exactly one waiting append through and holds the
    lock again before the next one: a second connection queues for the lock while the first
    still holds it; PostgreSQL hands a contended row lock to its waiters in order, so the
    worker's append goes first, and the gate's second connection has it before the worker can
    ask again. A job's steps each end with an append (its JobStep row updated, then its event,
    in one transaction), so `run_to_step_end` stops a worker with step N done on the host and
    not yet recorded, the moment a crash hurts most.
    """

    def __init__(self) -> None:
        from controlplane.audit.models import AuditChainHead
        from deployments.models import JobStep

        require_postgresql()
        self.head_table = AuditChainHead._meta.db_table
        self.step_table = JobStep._meta.db_table
        self.lockers = [psycopg.connect(dsn()), psycopg.connect(dsn())]
        self.watch = psycopg.connect(dsn(), autocommit=True)
        self.pids = [c.info.backend_pid for c in self.lockers]
        self.holder: int | None = None
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="audit-gate")

    def close(self) -> None:
        self.release()
        self.pool.shutdown(wait=True)
        for conn in [*self.lockers, self.watch]:
            conn.close()

    def _lock(self, index: int) -> None:
        found = (
            self.lockers[index]
            .execute(f"SELECT seq FROM {self.head_table} WHERE id = 1 FOR UPDATE")
            .fetchone()
        )
        assert found is not None, "the audit chain has no head row yet"

    def hold(self) -> None:
        assert self.holder is None
        self._lock(0)
        self.holder = 0

    def release(self) -> None:
        if self.holder is not None:
            self.lockers[self.holder].rollback()
            self.holder = None

    def _blocked_by(self, pid: int) -> list[int]:
        rows = self.watch.execute(
            "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", [pid]
        ).fetchall()
        return [r[0] for r in rows if r[0] not in self.pids]

    def waiter(self, timeout: float = 20.0, explain: Any = None) -> int:
        """The backend waiting to append (the worker's), once there is one."""
        assert self.holder is not None
        holder_pid = self.pids[self.holder]
        return wait_until(
            lambda: (self._blocked_by(holder_pid) or [None])[0],
            timeout=timeout,
            interval=0.01,
            explain=explain,
        )

    def step(self) -> None:
        """Let the one waiting append through; hold the lock again before the next."""
        assert self.holder is not None
        following = 1 - self.holder
        got: Future[None] = self.pool.submit(self._lock, following)
        wait_until(
            lambda: (
                got.done()
                or bool(
                    self.watch.execute(
                        "SELECT cardinality(pg_blocking_pids(%s))", [self.pids[following]]
                    ).fetchone()[0]
                )
            ),
            timeout=10,
            interval=0.005,
        )
        self.lockers[self.holder].rollback()
        got.result(timeout=30)
        self.holder = following

    def at_end_of_step(self, change_id: int, seq: int) -> bool:
        """Whether step `seq` of the change is being closed: its row is locked by the
        transaction that also writes its audit event."""
        try:
            self.watch.execute(
                f"SELECT id FROM {self.step_table} WHERE change_id = %s AND seq = %s "
                "FOR UPDATE NOWAIT",
                [change_id, seq],
            )
        except psycopg.errors.LockNotAvailable:
            return True
        return False  # not there yet, or there and nobody is writing it

    def run_to_step_end(self, change_id: int, seq: int, explain: Any = None) -> int:
        """Step the appends until the worker waits to record the end of step `seq`; returns
        the worker's backend pid (it is left waiting)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pid = self.waiter(explain=explain)
            if self.at_end_of_step(change_id, seq):
                return pid
            self.step()
        raise AssertionError(
            f"the job never reached the end of step {seq}: {explain and explain()}"
        )


@pytest.fixture
def audit_gate(transactional_db: None) -> Iterator[AuditGate]:
    gate = AuditGate()
    try:
        yield gate
    finally:
        gate.close()


def terminate_backend(pid: int) -> None:
    """pg_terminate_backend from a superuser connection of its own, to another database."""
    with psycopg.connect(dsn("postgres"), autocommit=True) as su:
        su.execute("SELECT pg_terminate_backend(%s)", [pid])
