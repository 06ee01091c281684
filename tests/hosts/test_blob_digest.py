"""A section's blob digest, remembered by the section's bytes, is always the digest of its
record's canonical JSON (SnapshotBlob.digest_of), whatever it was asked for before."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hosts.models import SnapshotBlob
from hosts.services import blobs

SECTIONS = st.fixed_dictionaries(
    {
        "output": st.text(),
        "exit_status": st.none() | st.integers(-(2**31), 2**31),
        "truncated": st.booleans(),
    }
)


@settings(max_examples=300, deadline=None)
@given(st.lists(SECTIONS, max_size=6))
def test_it_is_the_digest_of_the_record_asked_once_or_again(sections: list[dict[str, Any]]) -> None:
    for section in sections + sections:  # the second time from what was remembered
        record = blobs._record(section)
        assert blobs.blob_digest(record) == SnapshotBlob.digest_of(record)


def test_the_exit_status_and_the_truncation_are_part_of_what_is_remembered() -> None:
    records = [
        blobs._record({"output": "GPU 0: NVIDIA H100\n", "exit_status": status, "truncated": cut})
        for status in (0, 1, None)
        for cut in (False, True)
    ]
    digests = [blobs.blob_digest(r) for r in records]
    assert digests == [SnapshotBlob.digest_of(r) for r in records]
    assert len(set(digests)) == 6


def test_a_full_memory_is_forgotten_not_grown(monkeypatch: Any) -> None:
    monkeypatch.setattr(blobs, "DIGESTS_MAX", 3)
    blobs._digests.clear()
    for i in range(10):
        blobs.blob_digest(blobs._record({"output": f"line {i}\n", "exit_status": 0}))
        assert len(blobs._digests) <= 3
