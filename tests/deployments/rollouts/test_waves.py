"""Which wave each host is in: a canary of one, then waves by count or by percentage."""

from __future__ import annotations

import pytest

from deployments.rollouts.choices import WaveUnit
from deployments.rollouts.waves import hosts_per_wave, wave_label, wave_numbers


def test_a_canary_then_waves_of_a_count() -> None:
    assert wave_numbers(6, wave_size=2, unit=WaveUnit.HOSTS) == [0, 1, 1, 2, 2, 3]
    assert wave_numbers(4, wave_size=3, unit=WaveUnit.HOSTS) == [0, 1, 1, 1]
    assert wave_numbers(1, wave_size=5, unit=WaveUnit.HOSTS) == [0]
    assert wave_numbers(0, wave_size=5, unit=WaveUnit.HOSTS) == []


def test_a_percentage_is_of_all_the_hosts_rounded_up() -> None:
    assert hosts_per_wave(40, wave_size=25, unit=WaveUnit.PERCENT) == 10
    assert hosts_per_wave(4, wave_size=10, unit=WaveUnit.PERCENT) == 1  # never none
    assert hosts_per_wave(4, wave_size=50, unit=WaveUnit.PERCENT) == 2
    assert wave_numbers(5, wave_size=50, unit=WaveUnit.PERCENT) == [0, 1, 1, 1, 2]


def test_sizes_that_make_no_wave_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        hosts_per_wave(4, wave_size=0, unit=WaveUnit.HOSTS)
    with pytest.raises(ValueError, match="at most 100"):
        hosts_per_wave(4, wave_size=101, unit=WaveUnit.PERCENT)


def test_waves_are_named_as_people_count_them() -> None:
    assert [wave_label(w) for w in range(3)] == ["the canary", "wave 2", "wave 3"]
