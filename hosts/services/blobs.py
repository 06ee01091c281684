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
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connection, transaction

from ..models import SnapshotBlob, StateSnapshot

BLOB_SQL_BATCH = 1000  # ids per statement


def _record(section: dict[str, Any]) -> dict[str, Any]:
    return {
        "output": str(section.get("output", "")).replace("\x00", ""),
        "exit_status": section.get("exit_status"),
        "truncated": bool(section.get("truncated", False)),
    }


def raw_store(raws: list[dict[str, Any]]) -> list[dict[str, int]]:
    """Store each distinct section of `raws` once; return each raw's `{section: blob id}`.

    Called inside the transaction that stores the snapshots naming these blobs.
    """
    by_sha: dict[str, dict[str, Any]] = {}
    names: list[dict[str, str]] = []
    for raw in raws:
        index = {}
        for name, section in raw.items():
            record = _record(section)
            sha = SnapshotBlob.digest_of(record)
            by_sha[sha] = record
            index[name] = sha
        names.append(index)
    if not by_sha:
        return [{} for _ in raws]
    ids: dict[str, int] = {}
    wanted = sorted(by_sha)
    with transaction.atomic():
        # Most sections exist already (unchanged since the last round): find those first, so
        # only new content travels to the database.
        ids.update(_lock_blobs(wanted))
        for _attempt in range(5):
            missing = [sha for sha in wanted if sha not in ids]
            if not missing:
                break
            SnapshotBlob.objects.bulk_create(
                [SnapshotBlob(sha256=sha, **by_sha[sha]) for sha in missing],
                ignore_conflicts=True,
                batch_size=BLOB_SQL_BATCH,
            )
            ids.update(_lock_blobs(missing))
        else:  # pragma: no cover - retention removed the same blobs five times in a row
            raise RuntimeError("could not store the probe's raw output blobs")
    return [{name: ids[sha] for name, sha in index.items()} for index in names]


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
    return {int(pk) for pk in index.values()}


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
