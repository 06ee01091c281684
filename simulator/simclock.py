"""A host's monotonic clock, optionally running faster than the real one (`time_scale`).

With `time_scale=0.01` one real second is a hundred simulated ones: models load, engines step
and pip downloads a hundred times faster, so tests of slow things stay quick. Only the
machine's own notion of time is scaled; the wall clock (journal timestamps) and what the SSH
transport does (the `slow` fault, stdin timeouts, the `sleep` builtin) stay real.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class ScaledClock:
    """Monotonic seconds that pass 1/scale times as fast as `base`'s."""

    def __init__(self, scale: float, base: Callable[[], float] = time.monotonic) -> None:
        if not scale > 0:
            raise ValueError(f"time scale must be positive, got {scale!r}")
        self.scale = scale
        self._base = base
        self._origin = base()

    def __call__(self) -> float:
        return self._origin + (self._base() - self._origin) / self.scale


def scaled(clock: Callable[[], float], scale: float) -> Callable[[], float]:
    """`clock` itself at scale 1, else a ScaledClock over it."""
    return clock if scale == 1.0 else ScaledClock(scale, clock)
