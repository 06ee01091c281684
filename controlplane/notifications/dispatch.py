"""What the notifications app hands to its Celery tasks, sent by task name: services never
import its tasks (which import the services), so the app has no import cycle to hide in a
function."""

from __future__ import annotations

from typing import Any

from celery import current_app

DELIVER = "controlplane.notifications.tasks.deliver"
REQUEUE_DELIVERIES = "controlplane.notifications.tasks.requeue_deliveries"


def send(task: str, **options: Any) -> None:
    """Queue `task` (one of the names above) with Celery's options (args, queue, countdown...)."""
    current_app.send_task(task, **options)
