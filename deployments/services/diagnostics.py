"""DCGM's GPU diagnostic on an operator's request: read-only, audited, never while a change job
is queued or running on the host, refused on a host whose GPUs are MIG-partitioned (DCGM does
not run its diagnostic there). The result lands in a snapshot (trigger `diagnostic`) that the
verdict weighs until the next diagnostic."""

from __future__ import annotations

from typing import Any

from controlplane.accounts.roles import OPERATOR
from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from hosts import commands
from hosts import selectors as host_selectors
from hosts import services as host_services
from hosts.choices import ProbeTrigger
from hosts.models import Host, StateSnapshot

from ..choices import ChangeStatus
from ..dispatch import gpu_diagnostic_send
from ..models import ChangeRequest
from .refusals import ChangeRefused, require_role


def _refuse_unless_it_may_run(host: Host) -> None:
    busy = (
        ChangeRequest.objects.filter(
            host=host, status__in=[ChangeStatus.QUEUED, ChangeStatus.RUNNING]
        )
        .order_by("pk")
        .first()
    )
    if busy is not None:
        raise ChangeRefused(
            f"change #{busy.pk} is {busy.get_status_display()} on {host.name}: a GPU "
            "diagnostic never runs during a change",
            code="conflict",
        )
    latest = host_selectors.latest_snapshot(host)
    mig = latest is not None and any(e.mig_mode for e in latest.state().gpu_errors)
    if mig:
        raise ChangeRefused(
            f"{host.name}'s GPUs are MIG-partitioned: DCGM's diagnostic does not run on MIG",
            code="conflict",
        )


def gpu_diagnostic_allowed(*, user: Any, host: Host | None = None) -> None:
    """An operator of `host` (without a host: anywhere, the first gate)."""
    require_role(user, OPERATOR, "Running a GPU diagnostic", host)


def gpu_diagnostic_request(*, host: Host, level: int, user: Any) -> None:
    """Queue DCGM's diagnostic at `level` (1: deployment checks, seconds; 2: also PCIe and
    memory tests, minutes) on `host`; audited as host.gpu_diagnostic_requested."""
    gpu_diagnostic_allowed(user=user, host=host)
    if level not in commands.DIAGNOSTIC_LEVELS:
        levels = " or ".join(str(n) for n in commands.DIAGNOSTIC_LEVELS)
        raise ChangeRefused(f"a GPU diagnostic runs at level {levels}, not {level!r}")
    _refuse_unless_it_may_run(host)
    audit.record(
        action=AuditAction.HOST_GPU_DIAGNOSTIC_REQUESTED,
        actor=user,
        target=host,
        host=host,
        data={"level": level, "command": commands.join(commands.gpu_diagnostic(level))},
    )
    gpu_diagnostic_send(host.pk, level)


def gpu_diagnostic_run(*, host_id: int, level: int) -> StateSnapshot | None:
    """The worker's side: check again that nothing forbids it now, probe with the diagnostic,
    and decide the host's verdict on it. None when it may no longer run (a change started)."""
    host = Host.objects.select_related("credential").get(pk=host_id)
    try:
        _refuse_unless_it_may_run(host)
    except ChangeRefused:
        return None
    # Stored like any probe: the verdict is decided on it as the snapshot is recorded.
    return host_services.host_probe(
        host=host, trigger=ProbeTrigger.DIAGNOSTIC, gpu_diagnostic=level
    )
