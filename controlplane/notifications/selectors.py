"""Reads for the notifications pages."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from controlplane.accounts.models import HostGroup
from controlplane.accounts.roles import user_scope

from .choices import OPEN_DELIVERY_STATUSES, DeliveryStatus
from .models import WebhookDelivery, WebhookEndpoint

PAGE_SIZE = 50


def endpoints_list() -> QuerySet[WebhookEndpoint]:
    return WebhookEndpoint.objects.order_by("name").prefetch_related("host_groups")


def deliveries_visible(user: Any) -> QuerySet[WebhookDelivery]:
    """Deliveries `user` may read: none about a host outside their scope (as if they did not
    exist); those about no host (a test, say) stay."""
    return WebhookDelivery.objects.filter(user_scope(user).host_or_none_q("host_id"))


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


def host_group_ids(host_id: int | None) -> frozenset[int] | None:
    """The groups of the host an event is about (None: the event is about no host)."""
    if host_id is None:
        return None
    members = HostGroup.hosts.through.objects.filter(host_id=host_id)
    return frozenset(members.values_list("hostgroup_id", flat=True))
