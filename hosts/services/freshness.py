"""The freshness rule: whether a snapshot may back a destructive action."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.utils import timezone

from ..choices import SnapshotStatus
from ..models import Host, StateSnapshot
from ..state import problem_lines

# --- freshness -------------------------------------------------------------------------------


class SnapshotNotUsable(Exception):
    """A snapshot cannot back a destructive action. The message says why, for a person."""

    def __init__(self, message: str, *, age_seconds: float | None = None, limit: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.age_seconds = age_seconds
        self.limit = limit


def unknown_facts(snapshot: StateSnapshot) -> list[str]:
    """What a partial snapshot could not read, for a person to acknowledge: one line per
    distinct error, naming every section it hit (a driver failure fails five nvidia-smi reads
    with the same message)."""
    return problem_lines(snapshot.state().problems)


def snapshot_require_fresh(
    *,
    snapshot: StateSnapshot,
    host: Host,
    now: datetime | None = None,
    allow_partial: bool = False,
) -> float:
    """The freshness rule, in the one place the UI, the API and the worker all call.

    A snapshot backs a destructive action only if it is of this host, has status ok (or
    partial, when the caller allows it: a stop or restart whose requester acknowledged the
    unknown facts), is younger than SNAPSHOT_MAX_AGE_SECONDS, and no later snapshot of the host
    that could back it differs materially. Returns the snapshot's age in seconds.
    """
    now = now or timezone.now()
    limit = settings.SNAPSHOT_MAX_AGE_SECONDS
    age = snapshot.age_seconds(now)
    usable = [SnapshotStatus.OK, SnapshotStatus.PARTIAL] if allow_partial else [SnapshotStatus.OK]
    if snapshot.host_id != host.pk:
        raise SnapshotNotUsable(
            f"snapshot #{snapshot.pk} is of {snapshot.host.name}, not {host.name}", limit=limit
        )
    if snapshot.status == SnapshotStatus.PARTIAL and not allow_partial:
        raise SnapshotNotUsable(
            f"snapshot #{snapshot.pk} is partial ({'; '.join(unknown_facts(snapshot))}). A stop "
            "or restart may go ahead if you acknowledge what is unknown; any other change needs "
            "a complete snapshot: probe again once the cause is fixed.",
            age_seconds=age,
            limit=limit,
        )
    if snapshot.status not in usable:
        raise SnapshotNotUsable(
            f"snapshot #{snapshot.pk} has status {snapshot.status}; only an ok snapshot can back "
            "a change",
            age_seconds=age,
            limit=limit,
        )
    if age > limit:
        raise SnapshotNotUsable(
            f"snapshot #{snapshot.pk} is {age:.0f} s old; the limit is {limit} s. Probe again.",
            age_seconds=age,
            limit=limit,
        )
    mine = snapshot.material_fingerprint()
    later = host.snapshots.filter(status__in=usable, taken_at__gt=snapshot.taken_at)
    for newer in later.order_by("taken_at").only("id", "parsed", "taken_at"):
        if newer.material_fingerprint() != mine:
            raise SnapshotNotUsable(
                f"snapshot #{snapshot.pk} is superseded: snapshot #{newer.pk} saw the host "
                "differently. Review the new state.",
                age_seconds=age,
                limit=limit,
            )
    return age
