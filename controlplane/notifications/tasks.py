"""Celery tasks: thin wrappers around notifications.services."""

from __future__ import annotations

from celery import shared_task

from . import dispatch, services


@shared_task(name=dispatch.DELIVER, acks_late=True)
def deliver(delivery_id: int) -> str:
    return services.delivery_attempt(delivery_id=delivery_id)


@shared_task(name=dispatch.REQUEUE_DELIVERIES)
def requeue_deliveries() -> int:
    return len(services.deliveries_requeue())
