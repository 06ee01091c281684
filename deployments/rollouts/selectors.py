"""Reads of rollouts for the pages and the API: who sees which, the live page's waves, and the
approver's review (what each host serves now, and whether its snapshot may be approved on)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, QuerySet
from django.utils import timezone

from hosts import selectors as host_selectors
from hosts import services as host_services
from hosts.models import Host, HostHealth, StateSnapshot
from hosts.scope import hosts_visible

from .choices import BUSY_HOST_STATUSES, FINAL_ROLLOUT_STATUSES, RolloutStatus
from .models import Rollout, RolloutHost
from .waves import wave_label

HOST_RELATED = (
    "host",
    "deployment",
    "change",
    "rollback_change",
    "approved_revision",
    "approved_snapshot",
)


def rollouts_visible(user: Any) -> QuerySet[Rollout]:
    """The rollouts every host of which `user` sees, newest first."""
    hidden = Host.objects.exclude(pk__in=hosts_visible(user).values("pk"))
    return (
        Rollout.objects.exclude(hosts__host__in=hidden)
        .select_related("model")
        .order_by("-created_at", "-pk")
    )


def rollouts_filtered(*, user: Any, status: str = "") -> QuerySet[Rollout]:
    """The rollouts `user` sees (rollouts_visible), of one status when asked."""
    rollouts = rollouts_visible(user)
    return rollouts.filter(status=status) if status else rollouts


def rollouts_waiting(*, user: Any, limit: int = 50) -> list[Rollout]:
    """The rollouts waiting for approval of which `user` sees every host, oldest first, with
    their host count (`host_count`): the approvals page lists them beside the changes."""
    return list(
        rollouts_visible(user)
        .filter(status=RolloutStatus.PENDING_APPROVAL)
        .annotate(host_count=Count("hosts"))
        .order_by("created_at", "pk")[:limit]
    )


def rollout_for_user(*, user: Any, pk: int) -> Rollout | None:
    return rollouts_visible(user).filter(pk=pk).first()


@dataclass
class Wave:
    number: int
    label: str
    hosts: list[RolloutHost] = field(default_factory=list)
    current: bool = False


@dataclass
class RolloutPage:
    """What the live rollout page shows."""

    rollout: Rollout
    waves: list[Wave]
    counts: dict[str, int]
    finished: bool  # nothing will move any more: the page stops polling
    approval: Any = None


def rollout_page(rollout: Rollout) -> RolloutPage:
    hosts = list(
        RolloutHost.objects.filter(rollout=rollout)
        .select_related(*HOST_RELATED)
        .order_by("wave", "position")
    )
    waves: dict[int, Wave] = {}
    for rh in hosts:
        wave = waves.setdefault(rh.wave, Wave(rh.wave, wave_label(rh.wave)))
        wave.hosts.append(rh)
    active = rollout.status in (RolloutStatus.RUNNING, RolloutStatus.PAUSED, RolloutStatus.HALTING)
    for wave in waves.values():
        wave.current = active and wave.number == rollout.current_wave
    busy = any(rh.status in BUSY_HOST_STATUSES for rh in hosts)
    return RolloutPage(
        rollout=rollout,
        waves=[waves[n] for n in sorted(waves)],
        counts=dict(Counter(rh.status for rh in hosts)),
        finished=rollout.status in FINAL_ROLLOUT_STATUSES and not busy,
        approval=rollout.approvals.order_by("-created_at").first(),
    )


@dataclass
class HostReview:
    """One host as the approver sees it: its newest snapshot, and why that may not back the
    approval (the host is then skipped when the rollout is approved)."""

    host: Host
    wave: int
    snapshot: StateSnapshot | None
    age_seconds: float | None
    models: list[str]
    verdict: str
    refusal: str | None


def rollout_review(rollout: Rollout) -> list[HostReview]:
    """The approver's view of each host still waiting: the same rule the approval applies
    (decisions._bind_serving_state), without writing anything."""
    now = timezone.now()
    found = []
    rows = RolloutHost.objects.filter(rollout=rollout).select_related("host", "deployment")
    verdicts = {
        h.host_id: h.verdict
        for h in HostHealth.objects.filter(host__in=[rh.host_id for rh in rows])
    }
    for rh in rows.order_by("position"):
        snapshot = host_selectors.latest_snapshot(rh.host)
        refusal = None if snapshot is not None else "never probed"
        if snapshot is not None:
            try:
                host_services.snapshot_require_fresh(snapshot=snapshot, host=rh.host, now=now)
            except host_services.SnapshotNotUsable as exc:
                refusal = exc.message
        dep = snapshot.state().deployments.get(rh.deployment.unit) if snapshot else None
        found.append(
            HostReview(
                host=rh.host,
                wave=rh.wave,
                snapshot=snapshot,
                age_seconds=snapshot.age_seconds(now) if snapshot else None,
                models=sorted(dep.server.models) if dep else [],
                verdict=verdicts.get(rh.host_id, "unknown"),
                refusal=refusal,
            )
        )
    return found
