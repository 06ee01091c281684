"""Fault 2: the broker (Redis) restarted in the middle of a run.

A Redis of the test's own, run as docker-compose runs it (no persistence), so a restart loses
every message it held: the queued job's, beat's, the running job's unacknowledged one. One
worker with beat embedded serves three hosts: a restart runs on gpu-01 (its model takes seconds
to load), gpu-02's restart waits in the queue behind it, and gpu-03's restart is requested
while Redis is down.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.utils import timezone

from deployments.choices import ChangeStatus
from hosts.choices import ProbeTrigger
from hosts.models import Host, StateSnapshot
from tests.chaos.conftest import RedisServer
from tests.chaos.jobs import DESTRUCTIVE, request_restart
from tests.fleet import register
from tests.waiting import wait_for_change, wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.integration]


def test_jobs_and_probes_survive_a_redis_restart(
    redis_server: RedisServer, chaos_workers: Any, make_fleet: Any, operator: Any
) -> None:
    fleet = register(make_fleet(3))
    fleet.set_load_seconds(4.0, "gpu-01")
    first, queued, late = fleet.deployments
    worker = chaos_workers(
        beat=True,
        PROBE_SWEEP_SECONDS="1",
        JOB_RECOVERY_SWEEP_SECONDS="1",
        JOB_REQUEUE_AFTER_SECONDS="2",
    )
    running = request_restart(operator, first)
    wait_until(
        running.steps.filter(name__startswith="wait for /health").exists,
        explain=worker.output,
    )
    waiting = request_restart(operator, queued)
    # gpu-02's job waits in Redis, behind gpu-01's, when Redis goes: its message is lost.
    job = ("deployments.tasks.execute_change", f"({waiting.pk},)")
    assert job in redis_server.tasks(worker.queue), redis_server.tasks(worker.queue)
    redis_server.stop()
    # The web answers a request while the broker is down: the change is kept, queued.
    during = request_restart(operator, late)
    assert during.status == ChangeStatus.QUEUED
    time.sleep(1)
    redis_server.start()
    back = timezone.now()
    assert job not in redis_server.tasks(worker.queue)  # gone with the restart
    for change in (running, waiting, during):
        change = wait_for_change(change, timeout=60)
        assert change.status == ChangeStatus.SUCCEEDED, (change.pk, change.status_reason)
    # Beat's schedule goes on: every host, due now, is probed on schedule after Redis is back.
    Host.objects.update(last_probe_at=None, probe_claimed_at=None)
    wait_until(
        lambda: (
            {
                s.host.name
                for s in StateSnapshot.objects.filter(
                    trigger=ProbeTrigger.SCHEDULE, taken_at__gt=back
                ).select_related("host")
            }
            == {"gpu-01", "gpu-02", "gpu-03"}
        ),
        timeout=30,
        explain=worker.output,
    )
    # Nothing ran twice: each host received its job's destructive commands exactly once.
    for name in ("gpu-01", "gpu-02", "gpu-03"):
        sent = [c for c in fleet.command_log(name) if any(d in c for d in DESTRUCTIVE)]
        assert len([c for c in sent if "systemctl restart" in c]) == 1, (name, sent)
