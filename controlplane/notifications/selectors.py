"""Reads for the notifications pages."""

from __future__ import annotations

from django.db.models import QuerySet

from .choices import OPEN_DELIVERY_STATUSES, DeliveryStatus
from .models import WebhookDelivery, WebhookEndpoint

PAGE_SIZE = 50


def endpoints_list() -> QuerySet[WebhookEndpoint]:
    return WebhookEndpoint.objects.order_by("name")


def deliveries_recent(
    *, status: str = "", endpoint_id: int | None = None, limit: int = PAGE_SIZE
) -> list[WebhookDelivery]:
    deliveries = WebhookDelivery.objects.order_by("-created_at", "-id")
    if status in DeliveryStatus.values:
        deliveries = deliveries.filter(status=status)
    if endpoint_id is not None:
        deliveries = deliveries.filter(endpoint_id=endpoint_id)
    return list(deliveries.defer("payload")[:limit])


def deliveries_any_open(deliveries: list[WebhookDelivery]) -> bool:
    return any(d.status in OPEN_DELIVERY_STATUSES for d in deliveries)


def delivery_get(*, pk: int) -> WebhookDelivery | None:
    return (
        WebhookDelivery.objects.select_related("endpoint")
        .prefetch_related("attempt_rows")
        .filter(pk=pk)
        .first()
    )
