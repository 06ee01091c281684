"""A parsed state's JSON form: exactly what the JSON round trip of dataclasses.asdict gives, for
any state the dataclasses can hold (the probe path writes it for every host every minute)."""

from __future__ import annotations

import json
from dataclasses import asdict

from hypothesis import given, settings
from hypothesis import strategies as st

from hosts.state import HostState


def _text(value: object) -> str:
    """Compared as JSON text: NaN, which the dataclasses can hold, is not equal to itself."""
    return json.dumps(value)


@settings(max_examples=300, deadline=None)
@given(st.from_type(HostState))
def test_to_json_is_the_json_of_asdict(state: HostState) -> None:
    assert _text(state.to_json()) == _text(json.loads(json.dumps(asdict(state))))


@settings(max_examples=300, deadline=None)
@given(st.from_type(HostState))
def test_a_state_read_back_from_its_json_gives_the_same_json(state: HostState) -> None:
    assert _text(HostState.from_json(state.to_json()).to_json()) == _text(state.to_json())


def test_keys_and_values_json_cannot_hold_as_they_are_come_out_as_json_has_them() -> None:
    from hosts.state_json import plain

    value = {1: (2, 3), 2.5: None, None: False, "x": [1.5, float("inf")]}
    assert plain(value) == json.loads(json.dumps(value))
