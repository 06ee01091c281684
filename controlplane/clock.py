"""The control plane's clock, injected where code waits, so tests control time without sleeping.

Ages, leases and deadlines all come from this clock, never from a host's: a host whose clock is
off by hours still gets its snapshots aged correctly.
"""

from __future__ import annotations

import datetime as dt
import time

from django.utils import timezone


class Clock:
    """Wall time for records, a monotonic clock for deadlines, and sleeping."""

    def now(self) -> dt.datetime:
        return timezone.now()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))


SYSTEM_CLOCK = Clock()
