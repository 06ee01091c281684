"""A lease never lapses while its holder lives, and only a stopped heartbeat frees the host."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.db import connection, transaction

from controlplane.audit.models import AuditEvent
from deployments import services
from deployments.choices import ChangeStatus
from deployments.execution import runner
from deployments.execution.lease import Lease, LeaseTaken
from deployments.models import ChangeRequest, HostLease
from hosts import services as host_services
from tests.fleet import register

ROOT = Path(__file__).resolve().parents[2]


def settings_load(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": "sqlite:///:memory:", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_settings_refuse_a_lease_shorter_than_the_longest_command_plus_a_margin():
    short = settings_load(JOB_LEASE_SECONDS="70", JOB_COMMAND_TIMEOUT_SECONDS="60")
    assert short.returncode != 0
    assert "ImproperlyConfigured: JOB_LEASE_SECONDS=70 is too short" in short.stderr
    assert "longest command timeout (60 s" in short.stderr
    assert settings_load(JOB_LEASE_SECONDS="75", JOB_COMMAND_TIMEOUT_SECONDS="60").returncode == 0


@pytest.mark.integration
def test_a_slow_command_keeps_the_host_and_no_recovery_can_take_it(
    make_fleet, operator, transactional_db, settings
):
    """A one-second lease and a host that takes 2.5 s to answer every command: the heartbeat
    keeps the lease alive through each command, so recovery never declares the job interrupted
    and no other holder gets the host until the job has finished."""
    fleet = register(make_fleet(1, slow_seconds=2.5))
    deployment = fleet.deployments[0]
    snapshot = host_services.host_probe(host=deployment.host, trigger="manual")
    assert snapshot.status == "ok", snapshot.error
    change = services.change_request_create(
        user=operator, deployment=deployment, kind="stop", snapshot=snapshot,
        reason="free the GPUs for a profiling run",
    )  # fmt: skip
    rival = ChangeRequest.objects.create(
        host=change.host, deployment=deployment, kind="restart", snapshot=snapshot,
        reason="a second job", requested_by_name="someone", needs_approval=False,
        status=ChangeStatus.CANCELLED, params_digest="-", correlation_id="rival",
    )  # fmt: skip
    settings.JOB_LEASE_SECONDS = 1  # heartbeat every 0.25 s
    fleet.set_fault("gpu-01", "slow")

    def execute() -> None:
        try:
            runner.change_execute(change_id=change.pk)
        finally:
            connection.close()

    worker = threading.Thread(target=execute)
    worker.start()
    checks = 0
    while worker.is_alive():
        assert runner.recover_interrupted() == []
        # Holding the lease row while trying to take it: the job cannot free it in between.
        with transaction.atomic():
            held = HostLease.objects.select_for_update().filter(host=change.host, holder=change)
            if held.exists():
                with pytest.raises(LeaseTaken):
                    Lease(rival).take()
                checks += 1
        time.sleep(0.2)
    worker.join()
    change.refresh_from_db()
    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    assert checks > 20  # the job held the host for many lease lengths
    assert not AuditEvent.objects.filter(action="change.interrupted").exists()
    assert HostLease.objects.get(host=change.host).holder is None


@pytest.mark.integration
def test_two_workers_given_the_same_change_run_it_once(make_fleet, operator, transactional_db):
    """A redelivered task (acks_late) reaches a second worker while the first runs it."""
    fleet = register(make_fleet(1))
    deployment = fleet.deployments[0]
    snapshot = host_services.host_probe(host=deployment.host, trigger="manual")
    change = services.change_request_create(
        user=operator, deployment=deployment, kind="restart", snapshot=snapshot,
        reason="pick up the new driver",
    )  # fmt: skip
    fleet.clear_command_log("gpu-01")
    barrier = threading.Barrier(2)
    results: list[object] = []

    def execute() -> None:
        try:
            barrier.wait()
            results.append(runner.change_execute(change_id=change.pk))
        finally:
            connection.close()

    workers = [threading.Thread(target=execute) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sorted(r is None for r in results) == [False, True]
    change.refresh_from_db()
    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    restarts = [c for c in fleet.command_log("gpu-01") if "systemctl restart" in c]
    assert len(restarts) == 1
    assert AuditEvent.objects.filter(action="change.started", target_id=str(change.pk)).count() == 1
