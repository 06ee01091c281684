"""What the hosts app hands to its Celery tasks, sent by task name: services never import
hosts.tasks (which imports the services), so the app has no import cycle to hide in a function.
Tests stand in for the broker by replacing `send`."""

from __future__ import annotations

from typing import Any

from celery import current_app

PROBE_HOST = "hosts.tasks.probe_host"
PROBE_DUE_HOSTS = "hosts.tasks.probe_due_hosts"
PROBE_BATCH = "hosts.tasks.probe_batch"
THIN_SNAPSHOTS = "hosts.tasks.thin_snapshots"
END_MAINTENANCE = "hosts.tasks.end_maintenance"
TRAIN_SECTION_DICTIONARY = "hosts.tasks.train_section_dictionary"


def send(task: str, **options: Any) -> None:
    """Queue `task` (one of the names above) with Celery's options (kwargs, queue, retry...)."""
    current_app.send_task(task, **options)
