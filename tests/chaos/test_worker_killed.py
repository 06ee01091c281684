"""Fault 1: the worker SIGKILLed during a model swap, at each step in turn.

Each swap runs on its own simulated host with its own worker. The audit gate
(tests/chaos/conftest.py) stops the worker when step N has done its work on the host but has not
yet been recorded, and the worker is SIGKILLed there, as the OOM killer would. Nothing tells
the control plane: the job's lease stops being renewed, and beat's recovery sweep (a real beat,
on short settings) has to find it. What an operator and an auditor see afterwards is then
compared with what the host itself logged.

The kills run one after the other and their leases lapse together, so the whole module costs
about one lease, not one per step.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from controlplane.accounts.roles import APPROVER, OPERATOR
from controlplane.audit.actions import AuditAction
from deployments.choices import ChangeStatus, StepStatus
from deployments.models import ChangeRequest, HostLease
from deployments.tasks import execute_change
from hosts.models import Host, HostHealth
from tests.chaos.conftest import AuditGate, RedisServer, broker, require_postgresql
from tests.chaos.jobs import (
    audited_commands,
    audited_probes,
    host_commands,
    is_probe,
    parked,
    request_swap,
    thread,
    verify_audit,
)
from tests.conftest import _user
from tests.fleet import TEST_TIME_SCALE, register, running_fleet
from tests.waiting import wait_for_change, wait_until
from tests.workers import WorkerProcess, spawn_worker, start_worker

# Transactional: the workers are other processes; each test empties the database afterwards,
# which the first does once the module's fixture has gathered what it found. One xdist group:
# the module's fixture runs the eleven kills once, so every test here must share its process.
pytestmark = [
    pytest.mark.chaos,
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("worker_killed"),
]

# The steps of a model swap, in the order the runner takes them (deployments.execution.runner,
# .plan, .verification). A complete swap in this module checks the list is still the runner's.
SWAP_STEPS = [
    "check the snapshot is still fresh",
    "check the approval",
    "take the host lease",
    "re-probe and compare with the decided snapshot",
    "baseline: coherence suite on revision 1",
    "write unit file (revision 2)",
    "systemctl daemon-reload",
    "systemctl restart",
    "wait for /health (up to 900 s)",
    "coherence suite on revision 2",
    "post-change snapshot",
]
# The shortest lease the settings accept with 2 s command timeouts (2 + 15 s margin); recovery
# sweeps every second. With the defaults (90 s lease, 30 s sweep) the same takes two minutes.
LEASE_SECONDS = 17
SHORT = {
    "JOB_LEASE_SECONDS": str(LEASE_SECONDS),
    "JOB_COMMAND_TIMEOUT_SECONDS": "2",
    "SSH_COMMAND_TIMEOUT": "2",
    "JOB_RECOVERY_SWEEP_SECONDS": "1",
}


@dataclass
class Killed:
    """One swap whose worker was killed at the end of `step`, as found after recovery."""

    step: str
    change: int
    status: str
    status_reason: str
    seconds_to_recovery: float
    lease_holder: int | None
    steps: list[tuple[int, str, str]]  # (seq, name, status)
    ran: list[str]  # what the host received (simulator's log), probes left out
    audited: list[str]  # what the audit log says the job sent
    probes_ran: int
    probes_audited: int
    interrupted_events: int
    verdict_codes: list[str]


@dataclass
class Outcome:
    killed: dict[str, Killed]
    reference_steps: list[str]
    reference_status: str
    verify: Any  # CompletedProcess of manage.py verify_audit


def _kill_at_end_of(
    seq: int, change: ChangeRequest, worker: WorkerProcess, fleet: Any, gate: AuditGate
) -> tuple[int, dt.datetime, list[str]]:
    """Send the approved swap to `worker`, stop the worker at the end of step `seq` and
    SIGKILL it there. Returns the change, when it was killed and what the host logged."""
    host = change.host.name
    fleet.clear_command_log(host)
    gate.hold()
    worker.wait_ready()
    execute_change.apply_async((change.pk,), queue=worker.queue)

    def explain() -> str:
        change.refresh_from_db()
        return f"change #{change.pk} {change.status} {change.status_reason}\n{worker.output()}"

    gate.run_to_step_end(change.pk, seq, explain)
    worker.kill()
    killed_at = timezone.now()
    ran = fleet.command_log(host)
    gate.release()
    return change.pk, killed_at, ran


def _found(name: str, change_id: int, killed_at: dt.datetime, log: list[str]) -> Killed:
    change = ChangeRequest.objects.get(pk=change_id)
    finished = change.finished_at or timezone.now()
    lease = HostLease.objects.filter(host=change.host_id).first()
    health = HostHealth.objects.filter(host=change.host_id).first()
    return Killed(
        step=name,
        change=change.pk,
        status=change.status,
        status_reason=change.status_reason,
        seconds_to_recovery=(finished - killed_at).total_seconds(),
        lease_holder=lease.holder_id if lease is not None else None,
        steps=[(s.seq, s.name, s.status) for s in change.steps.order_by("seq")],
        ran=host_commands(log),
        audited=audited_commands(change),
        probes_ran=sum(is_probe(line) for line in log),
        probes_audited=audited_probes(change),
        interrupted_events=sum(e.action == AuditAction.CHANGE_INTERRUPTED for e in thread(change)),
        verdict_codes=[r["code"] for r in health.reasons] if health is not None else [],
    )


def _run(fleet: Any, redis: RedisServer, tmp: Path) -> Outcome:
    people = (_user("otto", OPERATOR), _user("anna", APPROVER))
    registered = register(fleet)
    # No scheduled probes in the way: the jobs' own probes are the ones counted.
    Host.objects.update(probe_interval_seconds=86400, last_probe_at=timezone.now())
    env = dict(SHORT, CELERY_BROKER_URL=redis.url, AUDIT_CHECKPOINT_DIR=str(tmp / "checkpoints"))
    # Started side by side: each is needed only when its turn comes.
    workers = [
        spawn_worker(f"kill-{seq}", tmp / f"worker-{seq}.log", **env)
        for seq in range(1, len(SWAP_STEPS) + 1)
    ]
    # While they start: one approved swap per host, each parked until its worker's turn.
    with parked():
        changes = [request_swap(*people, d) for d in registered.deployments]
    gate = AuditGate()
    killed = {}
    try:
        for seq, name in enumerate(SWAP_STEPS, start=1):
            killed[name] = _kill_at_end_of(seq, changes[seq - 1], workers[seq - 1], fleet, gate)
        # A worker that lives, with beat: the recovery sweep runs there, and a swap on the
        # spare host shows the runner still takes the steps listed above.
        survivor = start_worker("survivor", tmp / "survivor.log", beat=True, **env)
        try:
            execute_change.apply_async((changes[-1].pk,), queue=survivor.queue)
            reference = wait_for_change(changes[-1], timeout=60)
            ids = [change_id for change_id, _, _ in killed.values()]
            wait_until(
                lambda: (
                    not ChangeRequest.objects.filter(
                        pk__in=ids, status=ChangeStatus.RUNNING
                    ).exists()
                ),
                timeout=LEASE_SECONDS + 60,
                interval=0.5,
                explain=survivor.output,
            )
        finally:
            survivor.stop()
        verified = verify_audit(tmp / "checkpoints")
        return Outcome(
            killed={name: _found(name, *facts) for name, facts in killed.items()},
            reference_steps=[s.name for s in reference.steps.order_by("seq")],
            reference_status=reference.status,
            verify=verified,
        )
    finally:
        gate.close()
        for worker in workers:
            if worker.proc.poll() is None:
                worker.kill()


@pytest.fixture(scope="module")
def outcome(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Outcome]:
    tmp = tmp_path_factory.mktemp("killed")
    with django_db_blocker.unblock():
        require_postgresql()
        redis = RedisServer(tmp)
        redis.start()
        try:
            with (
                running_fleet(
                    len(SWAP_STEPS) + 1, load_seconds=0.2, time_scale=TEST_TIME_SCALE,
                    state_dir=tmp / "fleet",
                ) as fleet,
                broker(redis.url),
            ):  # fmt: skip
                result = _run(fleet, redis, tmp)
        finally:
            redis.stop()
    yield result


def test_the_steps_killed_at_are_the_runners_steps(outcome: Outcome) -> None:
    assert outcome.reference_status == ChangeStatus.SUCCEEDED
    assert outcome.reference_steps == SWAP_STEPS


@pytest.mark.parametrize("step", SWAP_STEPS)
def test_a_worker_killed_at_the_end_of_a_step(outcome: Outcome, step: str) -> None:
    found = outcome.killed[step]
    # The job ends interrupted, found by beat's sweep once its lease lapsed, well within two
    # minutes; exactly one event says so.
    assert found.status == ChangeStatus.INTERRUPTED, (found.status, found.status_reason)
    assert found.seconds_to_recovery < 120
    assert found.interrupted_events == 1
    # The host is free for the next change.
    assert found.lease_holder is None
    # No step is left "running" in a job that has ended.
    assert all(status != StepStatus.RUNNING for _, _, status in found.steps), found.steps
    # The audit log names every command the host received from the job, in order, including
    # those of the step the worker died in; and every probe the job took.
    assert found.audited == found.ran
    assert found.probes_audited == found.probes_ran
    # The host's verdict says a change was interrupted there.
    assert "change_interrupted" in found.verdict_codes, found.verdict_codes


def test_the_audit_log_verifies_after_the_kills(outcome: Outcome) -> None:
    assert outcome.verify.returncode == 0, outcome.verify.stdout + outcome.verify.stderr


def test_with_the_default_settings_a_dead_job_is_found_within_two_minutes() -> None:
    """The lease (JOB_LEASE_SECONDS) lapses, then the next sweep (JOB_RECOVERY_SWEEP_SECONDS)
    marks the job; the scenario above runs the same path on short settings."""
    assert settings.JOB_LEASE_SECONDS + settings.JOB_RECOVERY_SWEEP_SECONDS <= 120
