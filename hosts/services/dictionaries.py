"""Training the zstd dictionary that probe sections are compressed with (hosts.packing), on the
fleet's own sections: those of the newest snapshots, as section records, and the parts of their
parsed state that are stored packed (PARSED_PACKED_KEYS)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random

from django.db.models import Q
from django.utils import timezone

from .. import packing
from ..models import PARSED_PACKED_KEYS, SectionDictionary, StateSnapshot

DICTIONARY_BYTES = 64 * 1024  # zstd's own default is 110 KB; these sections are small
SAMPLE_SNAPSHOTS = 2000  # the newest snapshots with raw output, across the fleet
MIN_SAMPLES = 100  # fewer and zstd's trainer cannot build a useful dictionary


class DictionaryNotTrained(Exception):
    """Too little raw output to train on, or zstd could not train on it."""


def section_samples(*, snapshots: int = SAMPLE_SNAPSHOTS) -> list[bytes]:
    """Section records (with their names, as `raw_packed` holds them) of the newest snapshots."""
    rows = (
        StateSnapshot.objects.filter(~Q(raw_index={}))
        .order_by("-id")
        .only("id", "raw_index", "raw_packed", "dictionary", "parsed")[:snapshots]
    )
    samples = []
    for snapshot in rows.iterator(chunk_size=200):
        for name, section in snapshot.raw.items():
            samples.append(packing.record_of(name, section))
        parsed = snapshot.parsed
        parts = {k: parsed[k] for k in PARSED_PACKED_KEYS if k in parsed}
        if parts:  # as models.parsed_for_storage packs them
            packed = [list(parsed), parts]
            samples.append(json.dumps(packed, ensure_ascii=False, separators=(",", ":")).encode())
    return samples


def section_dictionary_train(
    *, size: int = DICTIONARY_BYTES, snapshots: int = SAMPLE_SNAPSHOTS, seed: int = 0
) -> SectionDictionary:
    """Train a dictionary on the newest snapshots' sections and make it the one in use.

    Sections that every probe prints alike would fill the dictionary with copies of themselves,
    so each distinct record is a sample once.
    """
    samples = sorted(set(section_samples(snapshots=snapshots)))
    if len(samples) < MIN_SAMPLES:
        raise DictionaryNotTrained(
            f"only {len(samples)} distinct sections stored; probe the fleet for longer first "
            f"(at least {MIN_SAMPLES})"
        )
    random.Random(seed).shuffle(samples)
    try:
        content = packing.train(samples, size)
    except packing.PackingError as exc:
        raise DictionaryNotTrained(str(exc)) from exc
    sha = hashlib.sha256(content).hexdigest()
    found = SectionDictionary.objects.filter(sha256=sha).first()
    if found is not None:  # the same sections again: the same dictionary, already stored
        return found
    return SectionDictionary.objects.create(
        content=content,
        sha256=sha,
        samples=len(samples),
        sample_bytes=sum(len(s) for s in samples),
    )


def section_dictionary_due(every_seconds: int, now: dt.datetime | None = None) -> bool:
    """Whether beat should train a dictionary now: none yet (a fresh install compresses with
    plain zstd until one exists), or the newest is older than `every_seconds`, so that what is
    stored follows the fleet's sections as GPUs, engines and units change."""
    newest = SectionDictionary.objects.order_by("-created_at").values_list("created_at").first()
    if newest is None:
        return True
    return (now or timezone.now()) - newest[0] >= dt.timedelta(seconds=every_seconds)


def section_dictionary_train_if_due(
    every_seconds: int, *, size: int = DICTIONARY_BYTES
) -> SectionDictionary | None:
    """Beat's training: a new dictionary when one is due, None when not due or when the fleet
    has not been probed enough to train one (the next run tries again)."""
    if not section_dictionary_due(every_seconds):
        return None
    try:
        return section_dictionary_train(size=size)
    except DictionaryNotTrained:
        return None
