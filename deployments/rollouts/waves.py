"""Which wave each host of a rollout is in: the canary first, alone, then the rest in waves of a
count or a percentage of all the hosts. Pure: numbers in, numbers out."""

from __future__ import annotations

import math

from .choices import WaveUnit


def hosts_per_wave(count: int, *, wave_size: int, unit: str) -> int:
    """How many hosts a wave after the canary holds: `wave_size` hosts, or `wave_size` per cent
    of all `count` hosts rounded up (so 10 % of 4 hosts is one host, never none)."""
    if wave_size < 1:
        raise ValueError("a wave holds at least one host")
    if unit == WaveUnit.PERCENT:
        if wave_size > 100:
            raise ValueError("a wave holds at most 100 % of the hosts")
        return max(1, math.ceil(count * wave_size / 100))
    return wave_size


def wave_numbers(count: int, *, wave_size: int, unit: str) -> list[int]:
    """The wave of each of `count` hosts, in the order they are taken: 0 (the canary) for the
    first, then 1, 2, ... for each following group of hosts_per_wave."""
    if count <= 0:
        return []
    size = hosts_per_wave(count, wave_size=wave_size, unit=unit)
    return [0] + [1 + i // size for i in range(count - 1)]


def wave_label(wave: int) -> str:
    """How pages and messages name a wave: the canary, then wave 2, 3, ... (counting it)."""
    return "the canary" if wave == 0 else f"wave {wave + 1}"
