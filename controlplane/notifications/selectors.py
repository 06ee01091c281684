"""Reads for the notifications pages."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from controlplane.accounts.models import HostGroup
from controlplane.audit.models import AuditEvent, AuditEventHost
from controlplane.audit.selectors import event_scope_q

from .choices import OPEN_DELIVERY_STATUSES, DeliveryStatus
from .models import WebhookDelivery, WebhookEndpoint

PAGE_SIZE = 50


def endpoints_list() -> QuerySet[WebhookEndpoint]:
    return WebhookEndpoint.objects.order_by("name").prefetch_related("host_groups")


def deliveries_visible(user: Any) -> QuerySet[WebhookDelivery]:
    """Deliveries `user` may read: none about a host outside their scope (as if they did not
    exist); those about no host (a test, say) stay."""
    return WebhookDelivery.objects.filter(event_scope_q(user=user, seq_field="audit_seq"))


def deliveries_recent(
    *, user: Any, status: str = "", endpoint_id: int | None = None, limit: int = PAGE_SIZE
) -> list[WebhookDelivery]:
    deliveries = deliveries_visible(user).order_by("-created_at", "-id")
    if status in DeliveryStatus.values:
        deliveries = deliveries.filter(status=status)
    if endpoint_id is not None:
        deliveries = deliveries.filter(endpoint_id=endpoint_id)
    return list(deliveries.defer("payload")[:limit])


def deliveries_any_open(deliveries: list[WebhookDelivery]) -> bool:
    return any(d.status in OPEN_DELIVERY_STATUSES for d in deliveries)


def delivery_get(*, pk: int, user: Any) -> WebhookDelivery | None:
    return (
        deliveries_visible(user)
        .select_related("endpoint")
        .prefetch_related("attempt_rows")
        .filter(pk=pk)
        .first()
    )


def event_host_group_ids(event: AuditEvent) -> list[frozenset[int]]:
    """The groups of each host `event` is about: its own and the further hosts it names (a
    rollout's); empty for an event about no host."""
    host_ids = set(AuditEventHost.objects.filter(seq=event.seq).values_list("host_id", flat=True))
    if event.host_id is not None:
        host_ids.add(event.host_id)
    groups: dict[int, set[int]] = {host_id: set() for host_id in host_ids}
    members = HostGroup.hosts.through.objects.filter(host_id__in=host_ids)
    for host_id, group_id in members.values_list("host_id", "hostgroup_id"):
        groups[host_id].add(group_id)
    return [frozenset(g) for g in groups.values()]
