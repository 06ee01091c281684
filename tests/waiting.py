"""Waiting for something a real worker or a real host does, in one place.

Only for what happens in another process; what happens in this one is driven by the injected
clock or time-machine, never by sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    *,
    timeout: float = 30.0,
    interval: float = 0.05,
    explain: Callable[[], Any] | None = None,
) -> T:
    """Poll `condition` until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s: {explain() if explain else ''}")
        time.sleep(interval)


def wait_for_change(change: Any, *, timeout: float = 60.0) -> Any:
    """The change once its job has finished (no longer queued or running)."""
    from deployments.choices import ACTIVE_JOB_STATUSES

    def finished() -> Any:
        change.refresh_from_db()
        return change if change.status not in ACTIVE_JOB_STATUSES else None

    return wait_until(finished, timeout=timeout, interval=0.1, explain=lambda: change.status)
