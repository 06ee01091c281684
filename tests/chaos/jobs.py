"""Change jobs as the fault suite starts and reads them: requested and approved through the
product's services, and read back the way an auditor would (the audit log, the host's log)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from controlplane.celery import app
from deployments import services
from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest, Deployment, ModelArtifact
from hosts import commands
from hosts import services as host_services
from hosts.models import Host, StateSnapshot
from tests.workers import ROOT, _database_url

# What the host is told to do (as opposed to what it is asked about).
DESTRUCTIVE = ("systemctl restart", "systemctl stop", "systemctl start", "tee ", "daemon-reload")


def probe(host: Host) -> StateSnapshot:
    host = Host.objects.select_related("credential").get(pk=host.pk)
    snapshot = host_services.host_probe(host=host, trigger="manual")
    assert snapshot.status == "ok", snapshot.error
    return snapshot


def request_swap(
    operator: Any, approver: Any, deployment: Deployment, variant: str = "INT4"
) -> ChangeRequest:
    """A two-person model swap to Kimi-K2.5 `variant`, approved: queued on commit."""
    change = services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap", snapshot=probe(deployment.host),
        reason="INT4 serves more tokens per second",
        model=ModelArtifact.objects.get(name="moonshotai/Kimi-K2.5", variant=variant),
    )  # fmt: skip
    assert change.status == ChangeStatus.PENDING_APPROVAL, change.status
    services.change_request_approve(
        change=change, approver=approver, snapshot=probe(deployment.host), reason="looks fine"
    )
    change.refresh_from_db()
    return change


def request_restart(operator: Any, deployment: Deployment) -> ChangeRequest:
    return services.change_request_create(
        user=operator, deployment=deployment, kind="restart", snapshot=probe(deployment.host),
        reason="pick up the new driver",
    )  # fmt: skip


@contextlib.contextmanager
def parked() -> Iterator[None]:
    """What the product enqueues in this block goes to a queue no worker reads, so that the
    test decides when (and to which worker) the job is sent."""
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = "parked"
    try:
        yield
    finally:
        app.conf.task_default_queue = previous


def is_probe(line: str) -> bool:
    """A probe is one script, each section between begin and end marks, the host's clock among
    them (a change job's read of the server's API key is framed alike, and is a command)."""
    return f"{commands.MARK_BEGIN}clock" in line


def host_commands(log: list[str]) -> list[str]:
    """The command lines a host received, probes left out (the audit has those as snapshots)."""
    return [line for line in log if not is_probe(line)]


def thread(change: ChangeRequest) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(correlation_id=change.correlation_id).order_by("seq"))


def audited_commands(change: ChangeRequest) -> list[str]:
    """Every command line the audit log says the job sent, in order: each finished step's, then
    those of a step the job never finished (named by the event that ended the job)."""
    lines: list[str] = []
    for event in thread(change):
        if event.action == AuditAction.CHANGE_STEP:
            lines += (event.data.get("command") or "").splitlines()
        for step in event.data.get("unfinished_steps") or []:
            lines += (step.get("command") or "").splitlines()
    return lines


def audited_probes(change: ChangeRequest) -> int:
    return sum(e.action == AuditAction.PROBE_COMPLETED for e in thread(change))


def verify_audit(checkpoint_dir: Path) -> subprocess.CompletedProcess[str]:
    """`python manage.py verify_audit`, as an operator runs it, against the test database."""
    env = dict(os.environ, DATABASE_URL=_database_url(), AUDIT_CHECKPOINT_DIR=str(checkpoint_dir))
    return subprocess.run(
        [sys.executable, "manage.py", "verify_audit"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
