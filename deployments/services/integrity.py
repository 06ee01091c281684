"""What the engine integrity check last said about a deployment's engine, for pre-flight.

The check hashes every file of the engine's install, so probes run it on their own slower
schedule (or when asked: "Probe + check engine files"); a decision uses the newest snapshot of
the host that ran it, which need not be the snapshot the decision rests on.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from hosts.choices import SnapshotStatus
from hosts.models import StateSnapshot
from hosts.state import IntegrityReport

from .. import engine_repair
from ..models import Deployment

# How many of the newest integrity-checked snapshots to look through for the unit's report.
RECENT = 5


@dataclass(frozen=True)
class IntegrityFinding:
    report: IntegrityReport
    snapshot: StateSnapshot

    def age_seconds(self) -> float:
        return (timezone.now() - self.snapshot.taken_at).total_seconds()

    @property
    def clean(self) -> bool:
        return self.report.clean

    def describe(self) -> str:
        report = self.report
        engine = f"{report.dist} {report.version}" if report.dist else "the engine"
        said = report.error or engine_repair.differences(report)
        age = f"snapshot #{self.snapshot.pk}, {self.age_seconds():.0f} s ago"
        if report.clean:
            return f"{engine}: all {report.checked} files match its package ({age})"
        return f"{engine} differs from its package: {said} ({age})"


def latest_integrity(
    deployment: Deployment, *, not_before: StateSnapshot | None = None
) -> IntegrityFinding | None:
    """The newest integrity check of the deployment's engine (only from `not_before` on)."""
    checked = StateSnapshot.objects.filter(
        host_id=deployment.host_id,
        includes_integrity=True,
        status__in=[SnapshotStatus.OK, SnapshotStatus.PARTIAL],
    )
    if not_before is not None:
        checked = checked.filter(taken_at__gte=not_before.taken_at)
    for snapshot in checked.order_by("-taken_at", "-pk")[:RECENT]:
        report = engine_repair.integrity_report(snapshot.state(), deployment.unit)
        if report is not None:
            return IntegrityFinding(report, snapshot)
    return None


def nothing_to_repair(deployment: Deployment) -> IntegrityFinding | None:
    """The newest integrity check of the deployment's engine when it found every file as the
    package has it: pages then say "nothing to repair" instead of offering a repair (which
    stays allowed: it reinstalls the same files)."""
    found = latest_integrity(deployment)
    return found if found is not None and found.clean else None


def repair_basis(deployment: Deployment, decision: StateSnapshot) -> IntegrityFinding | str:
    """The integrity check an engine repair rests on, or why there is none it may rest on:
    one of this unit's engine, in the decision's snapshot or a newer one, at most
    SNAPSHOT_MAX_AGE_SECONDS old, that read the engine's name and version."""
    limit = settings.SNAPSHOT_MAX_AGE_SECONDS
    found = latest_integrity(deployment, not_before=decision)
    if found is None or found.age_seconds() > limit:
        return (
            f"an engine repair needs an integrity check of {deployment.unit}'s engine at most "
            f"{limit} s old, in the snapshot it rests on or a newer one: probe with the engine "
            "files checked (Probe + check engine files), then request it again"
        )
    report = found.report
    if report.error or not (report.dist and report.version):
        return f"the integrity check could not read the engine's install: {report.error}"
    return found
