"""The hash chain's arithmetic: the fast per-row form used by verification must produce the
same bytes as the definition (canonical JSON of the event), for any content."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random

import pytest

from controlplane.audit.chain import (
    GENESIS_HASH,
    ROW_COLUMNS,
    canonical_json,
    event_hash,
    event_payload,
    normalize_ip,
    row_canonical,
    row_hash,
)

AWKWARD = [
    "",
    "plain",
    'quote " inside',
    "back\\slash",
    "new\nline\ttab\rcr",
    "\x01\x1f control",
    "ünïcödé ✓ 🚀",
    "\u2028\u2029 separators",
    "</script>",
    "a" * 300,
]
FLOATS = [None, 0.0, 1.5, 0.001, 123.456, 1e16, 1e-7, 12345678.125]
IPS = [None, "", "10.0.0.1", "2001:db8::1", "2001:0db8:0000::0001", "::ffff:1.2.3.4", "junk"]


def _random_fields(rng: random.Random, seq: int, prev: str) -> dict:
    def text() -> str:
        return rng.choice(AWKWARD)

    return {
        "seq": seq,
        "created_at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        + dt.timedelta(seconds=rng.randint(0, 10**7), microseconds=rng.choice([0, 1, 500000])),
        "actor": text(),
        "actor_user_id": rng.choice([None, 0, 7, 10**12]),
        "action": text(),
        "target_type": text(),
        "target_id": text(),
        "target_label": text(),
        "host_id": rng.choice([None, 1, 99]),
        "host_label": text(),
        "snapshot_id": rng.choice([None, 3]),
        "snapshot_digest": text(),
        "snapshot_age_seconds": rng.choice(FLOATS),
        "correlation_id": text(),
        "data": rng.choice(
            [
                {},
                {"before": {"port": 22}, "after": {"port": 2222}},
                {"k": text(), "n": [1, 2.5, None, True], "deep": {"b": {"a": text()}}},
                {"big": 10**20, "f": 1e16, "neg": -0.0},
            ]
        ),
        "ip": rng.choice(IPS),
        "user_agent": text(),
        "prev_hash": prev,
    }


def _as_row(fields: dict) -> tuple:
    """The row as verification reads it: created_at as ISO text, data as its stored text."""
    values = {
        **fields,
        "created_at": fields["created_at"].isoformat(),
        "data": canonical_json(fields["data"]),
        "hash": "",
    }
    return tuple(values[c] for c in ROW_COLUMNS)


def test_the_fast_row_form_matches_the_definition_for_awkward_content() -> None:
    rng = random.Random(20261130)
    prev = GENESIS_HASH
    for seq in range(1, 3001):
        fields = _random_fields(rng, seq, prev)
        expected = event_hash(fields)
        assert row_canonical(_as_row(fields)) == canonical_json(event_payload(fields))
        assert row_hash(_as_row(fields)) == expected
        prev = expected


def test_the_hash_is_sha256_over_sorted_compact_json() -> None:
    fields = _random_fields(random.Random(1), 1, GENESIS_HASH)
    payload = event_payload(fields)
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert event_hash(fields) == hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize(
    "field", [c for c in ROW_COLUMNS if c not in ("hash", "seq", "created_at", "data")]
)
def test_changing_any_hashed_field_changes_the_hash(field: str) -> None:
    fields = _random_fields(random.Random(2), 5, GENESIS_HASH)
    fields.update(ip="10.0.0.9", snapshot_age_seconds=1.0, actor_user_id=1, host_id=1)
    fields.update(snapshot_id=1, prev_hash="a" * 64)
    changed = dict(fields)
    original = changed[field]
    changed[field] = 2 if isinstance(original, int) and not isinstance(original, bool) else None
    if field == "ip":
        changed[field] = "10.0.0.10"
    elif isinstance(original, str):
        changed[field] = original + "x"
    elif isinstance(original, float):
        changed[field] = original + 1
    assert event_hash(changed) != event_hash(fields)


def test_seq_time_and_data_are_covered() -> None:
    fields = _random_fields(random.Random(3), 5, GENESIS_HASH)
    base = event_hash(fields)
    assert event_hash({**fields, "seq": 6}) != base
    assert (
        event_hash({**fields, "created_at": fields["created_at"] + dt.timedelta(microseconds=1)})
        != base
    )
    assert event_hash({**fields, "data": {"other": 1}}) != base


def test_addresses_have_one_spelling() -> None:
    assert normalize_ip("2001:0db8:0000::0001") == "2001:db8::1"
    assert normalize_ip("10.0.0.1") == "10.0.0.1"
    assert normalize_ip("not an address") is None
    assert normalize_ip("") is None
