"""Fault 4: a host that stops answering in the middle of a job.

A restart is sent; while the model loads and the job polls /health, the simulated host either
drops off the network (`unreachable`: its SSH listener closes and open connections drop) or
keeps the connection but answers nothing in time (`slow`, 30 s per command, against 2 s
command timeouts). The job must fail at its next command, within its command timeout, and the
host's page and verdict must say the host does not answer.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from deployments.choices import ChangeStatus, StepStatus
from deployments.models import HostLease
from hosts.models import HostHealth, StateSnapshot
from tests.chaos.jobs import request_restart
from tests.fleet import register
from tests.waiting import wait_for_change, wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

COMMAND_TIMEOUT = 2  # JOB_COMMAND_TIMEOUT_SECONDS and SSH_COMMAND_TIMEOUT for the worker

# fault -> (the snapshot status the host shows, words its verdict uses, words the job uses)
FAULTS = {
    "unreachable": ("unreachable", "unreachable", "connect"),
    "slow": (
        "error",
        f"timed out after {COMMAND_TIMEOUT} s",
        f"timed out after {COMMAND_TIMEOUT} s",
    ),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_host_that_stops_answering_mid_job(
    fault: str, chaos_workers: Any, make_fleet: Any, operator: Any
) -> None:
    status, verdict_words, job_words = FAULTS[fault]
    fleet = register(make_fleet(1, load_seconds=3.0, slow_seconds=30.0))
    deployment = fleet.deployments[0]
    worker = chaos_workers(
        JOB_COMMAND_TIMEOUT_SECONDS=str(COMMAND_TIMEOUT),
        SSH_COMMAND_TIMEOUT=str(COMMAND_TIMEOUT),
        JOB_LEASE_SECONDS=str(COMMAND_TIMEOUT + 15),
    )
    change = request_restart(operator, deployment)
    wait_until(
        change.steps.filter(name__startswith="wait for /health").exists, explain=worker.output
    )
    fleet.set_fault("gpu-01", fault)
    fault_at = time.monotonic()

    change = wait_for_change(change, timeout=30)
    took = time.monotonic() - fault_at
    # Fails at its next command, without trying to restore anything on a host it cannot reach.
    assert change.status == ChangeStatus.FAILED, (change.status, change.status_reason)
    assert job_words in change.status_reason, change.status_reason
    waiting = change.steps.get(name__startswith="wait for /health")
    assert waiting.status == StepStatus.FAILED
    if fault == "slow":
        # The command timeout fired: no command waited the host's 30 s out.
        assert COMMAND_TIMEOUT <= took < 4 * COMMAND_TIMEOUT + 5, took
    assert not change.steps.filter(status=StepStatus.RUNNING).exists()
    assert HostLease.objects.get(host=deployment.host).holder is None
    # The host shows it: its newest snapshot, taken as the job failed, and its verdict.
    latest = StateSnapshot.objects.filter(host=deployment.host).order_by("-taken_at").first()
    assert latest is not None and latest.status == status, latest and latest.status
    health = HostHealth.objects.get(host=deployment.host)
    assert health.verdict == "unknown", (health.verdict, health.reasons)
    assert health.reasons[0]["code"] == status
    assert verdict_words in health.reasons[0]["text"], health.reasons
