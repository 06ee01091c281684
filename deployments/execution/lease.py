"""The host lease: who may send destructive commands to a host right now.

Taking the lease bumps its fencing token; the holder renews it (checking the token) before every
command and, as a heartbeat, every quarter lease while a command runs. A lease that was not
renewed for a whole JOB_LEASE_SECONDS means its holder is dead or cut off: only then may
recovery declare the job interrupted and hand the host to someone else.
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db.models import F, Q

from controlplane.clock import SYSTEM_CLOCK, Clock

from ..models import ChangeRequest, HostLease


class LeaseLost(Exception):
    """Another holder owns the host now (or the lease lapsed); stop acting at once."""


class LeaseTaken(Exception):
    """Someone else holds a live lease on this host."""


def lease_seconds() -> dt.timedelta:
    return dt.timedelta(seconds=settings.JOB_LEASE_SECONDS)


def heartbeat_every() -> float:
    return settings.JOB_LEASE_SECONDS / 4


class Lease:
    """One job's hold on one host."""

    def __init__(self, change: ChangeRequest, clock: Clock = SYSTEM_CLOCK) -> None:
        self.change = change
        self.host_id = change.host_id
        self.clock = clock
        self.token: int | None = None

    def take(self) -> int:
        """Take the host if nobody holds a live lease on it; returns the fencing token."""
        now = self.clock.now()
        HostLease.objects.get_or_create(host_id=self.host_id)
        taken = HostLease.objects.filter(
            Q(holder__isnull=True) | Q(expires_at__lt=now), host_id=self.host_id
        ).update(
            holder=self.change,
            fencing_token=F("fencing_token") + 1,
            expires_at=now + lease_seconds(),
            heartbeat_at=now,
        )
        if not taken:
            raise LeaseTaken("another job holds this host's lease")
        self.token = HostLease.objects.get(host_id=self.host_id).fencing_token
        return self.token

    def renew(self) -> None:
        """Extend the lease if, and only if, it is still ours and alive; else LeaseLost."""
        now = self.clock.now()
        if self.token is None:
            raise LeaseLost("the job never took the host lease")
        renewed = HostLease.objects.filter(
            host_id=self.host_id,
            holder=self.change,
            fencing_token=self.token,
            expires_at__gt=now,
        ).update(expires_at=now + lease_seconds(), heartbeat_at=now)
        if renewed != 1:
            raise LeaseLost(f"lease on host {self.host_id} lost (fencing token {self.token})")

    def release(self) -> None:
        if self.token is not None:
            HostLease.objects.filter(
                host_id=self.host_id, holder=self.change, fencing_token=self.token
            ).update(holder=None, expires_at=None)


def heartbeat_stopped(change: ChangeRequest, now: dt.datetime) -> bool:
    """Whether a running job is dead: it holds its host's lease but stopped renewing it, or it
    claimed its row a whole lease ago and never took the lease."""
    lease = HostLease.objects.filter(host=change.host_id).first()
    if lease is not None and lease.holder_id == change.pk:
        return lease.expires_at is None or lease.expires_at <= now
    return change.started_at is None or change.started_at <= now - lease_seconds()


def lease_free(*, change: ChangeRequest) -> bool:
    """Release the lease `change` holds, if it holds it (recovery of a dead job)."""
    return bool(
        HostLease.objects.filter(host=change.host_id, holder=change.pk).update(
            holder=None, expires_at=None
        )
    )
