"""Raw probe output stored once per distinct content: SnapshotBlob rows keyed by SHA-256.

A probe round stores its sections here and each snapshot keeps only `{section: blob id}`
(`StateSnapshot.raw_index`); `StateSnapshot.raw` reads them back. Retention removes a blob once
no snapshot names it (`blobs_collect`).

Concurrency on PostgreSQL, where probe rounds of several workers and retention run at once: a
round inserts missing blobs (ON CONFLICT DO NOTHING, in SHA-256 order so two rounds never wait
on each other crosswise) and then takes FOR KEY SHARE locks on every blob it names, as a
foreign key would; retention locks the blobs it means to remove FOR UPDATE SKIP LOCKED, so it
never removes one that a round still in flight is about to name, and never waits on a round.
A blob removed between a round's insert and its lock is inserted again.

Compression (hosts.packing): every section is compressed with the newest SectionDictionary
(plain zstd before one is trained, `train_section_dictionary`). The sections that differ on
every probe (`PACKED_SECTIONS`: readings, CPU times, timestamps) are not blobs: content
addressing never finds them again, and a row with its SHA-256 key and index entries per section
cost more than the section itself. They go into the snapshot's own `raw_packed`, together in one
frame. A round takes a FOR KEY SHARE lock on the dictionary it uses, as on its blobs; retention
removes a dictionary only once it is not the newest, no blob or snapshot names it, and it can
lock it FOR UPDATE SKIP LOCKED (`dictionaries_collect`), so a round in flight keeps its own.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from .. import packing
from ..models import SectionDictionary, SnapshotBlob, StateSnapshot, section_dictionary

BLOB_SQL_BATCH = 1000  # ids per statement
# Sections whose output differs on every probe (power, utilisation, CPU times, the `created`
# time of /v1/models, systemd's counters): kept in the snapshot's `raw_packed`, not as blobs.
# A name or prefix ("unit:" for every unit). Any other section is a blob; either way it reads
# back the same, so this list is about cost only.
PACKED_SECTIONS = ("gpus", "processes", "models:", "unit:")


def packed_section(name: str) -> bool:
    return any(name.startswith(p) if p.endswith(":") else name == p for p in PACKED_SECTIONS)


@dataclass(frozen=True)
class StoredRaw:
    """Where one probe's raw output went: the snapshot's raw_index and raw_packed, and the
    dictionary of the round (locked until commit), with which its parsed parts are packed too."""

    index: dict[str, int]
    packed: bytes | None
    dictionary_id: int | None


def _record(section: dict[str, Any]) -> dict[str, Any]:
    return {
        "output": str(section.get("output", "")).replace("\x00", ""),
        "exit_status": section.get("exit_status"),
        "truncated": bool(section.get("truncated", False)),
    }


# A section's blob digest (SnapshotBlob.digest_of: SHA-256 of its record's canonical JSON) by
# the SHA-256 of the record's bytes: most of a warm probe's sections are what the host printed
# last time, and hashing a 16 KB /metrics page costs a fifth of escaping it into JSON first.
# Bounded: forgotten whole when full (it fills again within a round).
DIGESTS_MAX = 100_000
_digests: dict[bytes, str] = {}
_digests_lock = threading.Lock()


def blob_digest(record: dict[str, Any]) -> str:
    """`SnapshotBlob.digest_of(record)` for a record `_record` made, remembered by its bytes."""
    hashed = hashlib.sha256(record["output"].encode("utf-8", "surrogatepass"))
    hashed.update(b"\0%r %r" % (record["exit_status"], record["truncated"]))
    key = hashed.digest()
    found = _digests.get(key)
    if found is None:
        found = SnapshotBlob.digest_of(record)
        with _digests_lock:
            if len(_digests) >= DIGESTS_MAX:
                _digests.clear()
            _digests[key] = found
    return found


def raw_store(raws: list[dict[str, Any]]) -> list[StoredRaw]:
    """Store each distinct section of `raws` once, compressed; return where each raw went.

    Called inside the transaction that stores the snapshots naming these blobs.
    """
    with transaction.atomic():
        dictionary_id = _dictionary_in_use()
        dictionary = section_dictionary(dictionary_id)
        by_sha: dict[str, dict[str, Any]] = {}
        plans: list[tuple[dict[str, str], list[tuple[str, dict[str, Any]]]]] = []
        for raw in raws:
            index: dict[str, str] = {}
            inline: list[tuple[str, dict[str, Any]]] = []
            for name, section in raw.items():
                record = _record(section)
                if packed_section(name):
                    index[name] = ""
                    inline.append((name, record))
                    continue
                sha = blob_digest(record)
                by_sha[sha] = record
                index[name] = sha
            plans.append((index, inline))
        ids = _blobs_store(by_sha, dictionary_id, dictionary) if by_sha else {}
    return [
        StoredRaw(
            index={name: ids[sha] if sha else 0 for name, sha in index.items()},
            packed=packing.pack_sections(inline, dictionary) if inline else None,
            dictionary_id=dictionary_id,
        )
        for index, inline in plans
    ]


def _dictionary_in_use() -> int | None:
    """The newest dictionary's id, locked FOR KEY SHARE until commit (None: none trained)."""
    if connection.vendor != "postgresql":
        return SectionDictionary.objects.order_by("-id").values_list("id", flat=True).first()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM hosts_sectiondictionary ORDER BY id DESC LIMIT 1 FOR KEY SHARE"
        )
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def _blobs_store(
    by_sha: dict[str, dict[str, Any]], dictionary_id: int | None, dictionary: packing.Dictionary
) -> dict[str, int]:
    ids: dict[str, int] = {}
    wanted = sorted(by_sha)
    # Most sections exist already (unchanged since the last round): find those first, so
    # only new content is compressed and travels to the database.
    ids.update(_lock_blobs(wanted))
    for _attempt in range(5):
        missing = [sha for sha in wanted if sha not in ids]
        if not missing:
            break
        SnapshotBlob.objects.bulk_create(
            [
                SnapshotBlob(
                    sha256=sha,
                    packed=packing.compress(packing.record_of("", by_sha[sha]), dictionary),
                    dictionary_id=dictionary_id,
                )
                for sha in missing
            ],
            ignore_conflicts=True,
            batch_size=BLOB_SQL_BATCH,
        )
        ids.update(_lock_blobs(missing))
    else:  # pragma: no cover - retention removed the same blobs five times in a row
        raise RuntimeError("could not store the probe's raw output blobs")
    return ids


def _lock_blobs(shas: list[str]) -> dict[str, int]:
    """{sha256: id} of the blobs that exist, each locked FOR KEY SHARE until commit."""
    found: dict[str, int] = {}
    for start in range(0, len(shas), BLOB_SQL_BATCH):
        chunk = shas[start : start + BLOB_SQL_BATCH]
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                # one text parameter: hex digests need no quoting, and adapting a long list
                # as an array costs the client more than the query
                cursor.execute(
                    "SELECT sha256, id FROM hosts_snapshotblob "
                    "WHERE sha256 = ANY(string_to_array(%s, ',')) FOR KEY SHARE",
                    [",".join(chunk)],
                )
                found.update(dict(cursor.fetchall()))
        else:  # SQLite: one writer at a time, nothing to lock against
            found.update(SnapshotBlob.objects.filter(sha256__in=chunk).values_list("sha256", "id"))
    return found


def blob_ids(index: dict[str, Any]) -> set[int]:
    """The blobs a raw_index names (0 names a section in the snapshot's raw_packed)."""
    return {int(pk) for pk in index.values() if pk}


def blobs_collect(candidates: Iterable[int]) -> int:
    """Remove the blobs among `candidates` that no snapshot names any more; how many went.

    Each chunk is one transaction: lock what no round holds (SKIP LOCKED), then ask which are
    still named, with a fresh statement that sees every round committed before the lock.
    """
    pending = sorted(set(candidates))
    removed = 0
    for start in range(0, len(pending), BLOB_SQL_BATCH):
        chunk = pending[start : start + BLOB_SQL_BATCH]
        with transaction.atomic():
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT id FROM hosts_snapshotblob WHERE id = ANY(%s) ORDER BY id "
                        "FOR UPDATE SKIP LOCKED",
                        [chunk],
                    )
                    locked = [row[0] for row in cursor.fetchall()]
                    if not locked:
                        continue
                    cursor.execute(
                        "DELETE FROM hosts_snapshotblob b WHERE b.id = ANY(%s) AND NOT EXISTS ("
                        "SELECT 1 FROM hosts_statesnapshot s WHERE "
                        "jsonb_path_query_array(s.raw_index, '$.*') @> to_jsonb(ARRAY[b.id]))",
                        [locked],
                    )
                    removed += cursor.rowcount
            else:
                named = _named_blobs_scanning(set(chunk))
                gone = [pk for pk in chunk if pk not in named]
                if gone:
                    removed += SnapshotBlob.objects.filter(pk__in=gone).delete()[0]
    return removed


def _named_blobs_scanning(among: set[int]) -> set[int]:
    """Which of `among` any snapshot names, by reading every raw_index (SQLite only)."""
    named: set[int] = set()
    indexes = StateSnapshot.objects.values_list("raw_index", flat=True)
    for index in indexes.iterator(chunk_size=2000):
        named |= blob_ids(index or {}) & among
        if named == among:
            break
    return named


def dictionaries_collect() -> int:
    """Remove the dictionaries no blob or snapshot needs any more, the newest always kept; how
    many went. Each is locked FOR UPDATE SKIP LOCKED first (PostgreSQL): a round that holds
    its dictionary (FOR KEY SHARE) is about to name it, so it is left for a later run."""
    newest = SectionDictionary.objects.order_by("-id").values_list("id", flat=True).first()
    if newest is None:
        return 0
    removed = 0
    for pk in SectionDictionary.objects.filter(id__lt=newest).values_list("id", flat=True):
        with transaction.atomic():
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT id FROM hosts_sectiondictionary WHERE id = %s "
                        "FOR UPDATE SKIP LOCKED",
                        [pk],
                    )
                    if cursor.fetchone() is None:
                        continue
            if (
                SnapshotBlob.objects.filter(dictionary_id=pk).exists()
                or StateSnapshot.objects.filter(dictionary_id=pk).exists()
            ):
                continue
            removed += SectionDictionary.objects.filter(pk=pk).delete()[0]
    return removed
