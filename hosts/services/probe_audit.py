"""The `probe.completed` events of a round of snapshots, written in their transaction.

Which snapshots get one is decided where they are stored (hosts.services.probe_recording):
every probe someone asked for, and a scheduled one whose status, material state or verdict
moved. A scheduled probe's event says which of those moved (`changed`).
"""

from __future__ import annotations

from typing import Any

from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction

from ..choices import ProbeTrigger
from ..models import Host, HostHealth, StateSnapshot


def probes_audit(
    pairs: list[tuple[Host, StateSnapshot]],
    trigger: str,
    audited: set[int],
    changes: dict[int, list[str]],
) -> None:
    """One event per snapshot of `pairs` whose id is in `audited`; `changes` by snapshot id."""
    entries = []
    for host, snapshot in pairs:
        if snapshot.pk not in audited:
            continue
        data: dict[str, Any] = {
            "status": snapshot.status,
            "trigger": trigger,
            "duration_ms": snapshot.duration_ms,
        }
        if trigger == ProbeTrigger.SCHEDULE:
            data["changed"] = changes[snapshot.pk]
        entries.append(
            {
                "action": AuditAction.PROBE_COMPLETED,
                "target": snapshot,
                "host": host,
                "snapshot": snapshot,
                "data": data,
            }
        )
    audit.record_many(entries)


def verdicts(host_ids: list[int]) -> dict[int, str]:
    """Each host's stored health verdict, to tell whether a round of snapshots moved it."""
    return dict(HostHealth.objects.filter(host_id__in=host_ids).values_list("host_id", "verdict"))
