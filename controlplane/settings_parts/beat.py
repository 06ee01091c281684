"""What beat runs: each entry's name, its task and how often, in seconds."""

from __future__ import annotations

from typing import Any


def beat_schedule(entries: dict[str, tuple[str, float]]) -> dict[str, dict[str, Any]]:
    """Celery's CELERY_BEAT_SCHEDULE from {name: (task, every so many seconds)}."""
    return {name: {"task": task, "schedule": every} for name, (task, every) in entries.items()}
