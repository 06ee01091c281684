"""A real Celery worker process for integration tests, on real Redis, sharing the test database.

The worker listens on a queue of its own, so tests never pick up anything else's messages.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from controlplane.celery import app

ROOT = Path(__file__).resolve().parent.parent


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "postgresql":
        user = db.get("USER") or "postgres"
        host = db.get("HOST") or "127.0.0.1"
        port = db.get("PORT") or 5432
        return f"postgres://{user}@{host}:{port}/{db['NAME']}"
    return f"sqlite:///{db['NAME']}"


class WorkerProcess:
    def __init__(self, proc: subprocess.Popen[bytes], queue: str, log: Path) -> None:
        self.proc = proc
        self.queue = queue
        self.log = log

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL, as the OOM killer or a lost node would."""
        self.proc.kill()
        self.proc.wait(10)

    def wait_ready(self, timeout: float = 30) -> WorkerProcess:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Celery worker exited:\n{self.output()}")
            if "ready." in self.output():
                return self
            time.sleep(0.1)
        self.proc.kill()
        raise RuntimeError(f"the Celery worker did not start:\n{self.output()}")

    def stop(self) -> None:
        """SIGTERM (a warm shutdown), SIGKILL if that takes too long."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def spawn_worker(
    queue: str, log: Path, *, beat: bool = False, **env_overrides: str
) -> WorkerProcess:
    """Start a worker without waiting for it (`wait_ready`): several start side by side.

    `beat=True` embeds Celery beat (the database schedule, sending to `queue`), for tests of
    what beat's sweeps do; `env_overrides` win over everything here, DATABASE_URL included.
    """
    env = dict(os.environ)
    env.update(
        DATABASE_URL=_database_url(),
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        HEALTH_POLL_SECONDS="0.2",
        # What the worker itself queues (webhook deliveries, ...) stays on the private queue.
        CELERY_TASK_DEFAULT_QUEUE=queue,
    )
    env.update(env_overrides)
    argv = [sys.executable, "-m", "celery", "-A", "controlplane", "worker", "-P", "solo",
            "-Q", queue, "-l", "info", "--without-gossip", "--without-mingle",
            "--without-heartbeat"]  # fmt: skip
    if beat:
        argv += ["-B", "-s", str(log.with_suffix(".beat-schedule"))]
    handle = log.open("wb")
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)
    return WorkerProcess(proc, queue, log)


def start_worker(
    queue: str, log: Path, *, beat: bool = False, **env_overrides: str
) -> WorkerProcess:
    return spawn_worker(queue, log, beat=beat, **env_overrides).wait_ready()


@contextlib.contextmanager
def private_worker(
    queue: str, log: Path, *, beat: bool = False, **env_overrides: str
) -> Iterator[WorkerProcess]:
    """A worker on `queue`; while it runs, tasks sent from the test process go there too."""
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    worker = start_worker(queue, log, beat=beat, **env_overrides)
    try:
        yield worker
    finally:
        app.conf.task_default_queue = previous
        worker.stop()
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(queue)


@pytest.fixture
def celery_worker(transactional_db: None, tmp_path: Path) -> Iterator[WorkerProcess]:
    """A worker consuming a private queue; tasks sent from the test go to that queue."""
    with private_worker(f"test-{uuid.uuid4().hex[:12]}", tmp_path / "worker.log") as worker:
        yield worker


@pytest.fixture
def private_queue() -> Iterator[str]:
    """A queued "Probe now" lands on a queue of this test's own, deleted afterwards: the real
    broker takes it, and no worker anywhere runs it."""
    queue = f"parked-{uuid.uuid4().hex[:12]}"
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    try:
        yield queue
    finally:
        app.conf.task_default_queue = previous
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(queue)
