"""Reading the audit chain fast: seq batches in plain SQL, the next batch prefetched while this
one is hashed, and on PostgreSQL a large log split into seq ranges walked by several processes.

Reads only; controlplane.audit.verification decides what the walk means.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db import connections

from .chain import GENESIS_HASH, ROW_COLUMNS, row_hash

# Problems, in the words the command and the UI use.
GAP = "gap"
HASH_MISMATCH = "hash_mismatch"
BROKEN_LINK = "broken_link"
HEAD_MISMATCH = "head_mismatch"
CHECKPOINT_MISMATCH = "checkpoint_mismatch"
MISSING_AFTER_CHECKPOINT = "missing_after_checkpoint"

# Below this many events one process is quicker than starting several.
PARALLEL_MIN_EVENTS = 200_000
MAX_WORKERS = 4


@dataclass(frozen=True)
class ChainProblem:
    seq: int
    kind: str
    reason: str


@dataclass(frozen=True)
class _RangeWalk:
    """What walking seq lo..hi found: its first problem, or how it starts and ends."""

    lo: int
    hi: int
    checked: int  # events that passed before the first problem
    first_prev_hash: str | None  # prev_hash of event `lo`, for the caller to link up
    last_hash: str
    problem: ChainProblem | None


# --- reading rows ----------------------------------------------------------------------------


def created_iso_sql(vendor: str, column: str = "created_at") -> str:
    """SQL giving created_at as the exact ISO 8601 text the hash covers (isoformat() of the
    UTC datetime: microseconds only when non-zero, "+00:00").

    Made by the database because the driver's timezone-aware datetime conversion alone costs
    more than hashing the row.
    """
    if vendor == "postgresql":
        utc = f"({column} AT TIME ZONE 'UTC')"
        return (
            f"to_char({utc}, 'YYYY-MM-DD\"T\"HH24:MI:SS') || "
            f"CASE WHEN mod(extract(microseconds FROM {column})::bigint, 1000000) = 0 "
            f"THEN '' ELSE to_char({utc}, '.US') END || '+00:00'"
        )
    if vendor == "sqlite":
        # Django stores str(naive UTC datetime): the digits isoformat() writes.
        return f"replace({column}, ' ', 'T') || '+00:00'"
    raise NotImplementedError(f"the audit log does not support {vendor}")


def _select_sql(vendor: str) -> str:
    placeholder = "?" if vendor == "sqlite" else "%s"
    created = created_iso_sql(vendor)
    columns = ", ".join(created if c == "created_at" else f'"{c}"' for c in ROW_COLUMNS)
    return (
        f"SELECT {columns} FROM audit_auditevent "  # noqa: S608 (no user input: column names)
        f"WHERE seq >= {placeholder} AND seq <= {placeholder} ORDER BY seq LIMIT {placeholder}"
    )


_DONE = object()


class _Prefetch:
    """Fetch the next batch of rows on a helper thread while the caller hashes this one.

    Much of a batch's cost is the database producing it, during which the driver releases the
    GIL, so overlapping it with hashing pays. The helper uses the caller's own DB-API
    connection (idle meanwhile), so a walk inside a transaction still sees that transaction's
    rows.
    """

    def __init__(self, raw_connection: Any, sql: str, lo: int, hi: int, batch_size: int) -> None:
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=2)
        self._stop = threading.Event()
        self._raw = raw_connection
        self._sql = sql
        self._lo, self._hi = lo, hi
        self._batch_size = batch_size
        self._thread = threading.Thread(target=self._run, name="audit-verify-fetch", daemon=True)

    def __enter__(self) -> _Prefetch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        while self._thread.is_alive():
            with contextlib.suppress(queue.Empty):
                self._queue.get(timeout=0.05)
        self._thread.join()

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        cursor = self._raw.cursor()
        try:
            start = self._lo
            while not self._stop.is_set() and start <= self._hi:
                cursor.execute(self._sql, (start, self._hi, self._batch_size))
                rows = cursor.fetchall()
                if not rows:
                    break
                if not self._put(rows):
                    return
                start = rows[-1][0] + 1
            self._put(_DONE)
        except BaseException as exc:  # handed to the consumer, which raises it
            self._put(exc)
        finally:
            cursor.close()

    def __iter__(self) -> Iterator[list[tuple[Any, ...]]]:
        while True:
            item = self._queue.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item


def _walk_range(
    using: str,
    lo: int,
    hi: int,
    head_seq: int,
    pinned: dict[int, tuple[int, str]],
    batch_size: int,
) -> _RangeWalk:
    """Check events lo..hi: contiguous, each matching its hash, each linked to the one before
    (except `lo`'s link, which the caller checks), each matching any checkpoint at its seq."""
    # One long function on purpose: it is the hot loop of verification (a million events in
    # seconds), and splitting it would add a call per event.
    connection = connections[using]
    connection.ensure_connection()
    sql = _select_sql(connection.vendor)
    expected = lo
    prev_hash: str | None = None
    first_prev: str | None = None

    def walk(problem: ChainProblem | None) -> _RangeWalk:
        return _RangeWalk(
            lo=lo,
            hi=hi,
            checked=expected - lo,
            first_prev_hash=first_prev,
            last_hash=prev_hash or "",
            problem=problem,
        )

    with _Prefetch(connection.connection, sql, lo, hi, batch_size) as batches:
        for rows in batches:
            for row in rows:
                seq = row[0]
                stored = row[18]
                if seq != expected:
                    return walk(
                        ChainProblem(expected, GAP, f"seq {expected} is missing (next is #{seq})")
                    )
                if row_hash(row) != stored:
                    return walk(
                        ChainProblem(
                            seq,
                            HASH_MISMATCH,
                            f"event #{seq} does not match its hash: it was changed after writing",
                        )
                    )
                if prev_hash is None:
                    first_prev = row[17]
                elif row[17] != prev_hash:
                    return walk(_broken_link(seq))
                if seq in pinned and pinned[seq][1] != stored:
                    return walk(
                        ChainProblem(
                            seq,
                            CHECKPOINT_MISMATCH,
                            f"event #{seq} differs from signed checkpoint line {pinned[seq][0]}: "
                            "the chain was rewritten and its hashes recomputed at or before it",
                        )
                    )
                prev_hash = stored
                expected = seq + 1
    if expected <= hi:
        missing = f"events #{expected}..#{hi} are" if expected < hi else f"event #{hi} is"
        missing += " missing"
        return walk(ChainProblem(expected, GAP, f"{missing} (the chain head records #{head_seq})"))
    return walk(None)


def _broken_link(seq: int) -> ChainProblem:
    return ChainProblem(
        seq,
        BROKEN_LINK,
        f"event #{seq} does not link to the hash of event #{seq - 1}: an event was replaced "
        "or the chain was spliced",
    )


def _walk_range_in_worker(
    args: tuple[str, int, int, int, dict[int, tuple[int, str]], int],
) -> _RangeWalk:
    try:
        return _walk_range(*args)
    finally:
        connections.close_all()


def _worker_count(connection: Any, events: int, requested: int | None) -> int:
    if requested is not None:
        wanted = requested
    elif events < PARALLEL_MIN_EVENTS:
        wanted = 1
    else:
        wanted = min(os.cpu_count() or 1, MAX_WORKERS)
    if wanted <= 1:
        return 1
    # Other processes cannot see rows of an open transaction; a daemonic process (a Celery
    # prefork child) may not start processes; SQLite gains nothing from it.
    if (
        connection.vendor != "postgresql"
        or connection.in_atomic_block
        or multiprocessing.current_process().daemon
    ):
        return 1
    return wanted


def walk_chain(
    using: str,
    head_seq: int,
    pinned: dict[int, tuple[int, str]],
    batch_size: int,
    workers: int | None,
) -> list[_RangeWalk]:
    connection = connections[using]
    count = _worker_count(connection, head_seq, workers)
    if count == 1 or head_seq == 0:
        return [_walk_range(using, 1, head_seq, head_seq, pinned, batch_size)]
    step = -(-head_seq // count)
    bounds = [(lo, min(lo + step - 1, head_seq)) for lo in range(1, head_seq + 1, step)]
    jobs = [
        (using, lo, hi, head_seq, {s: v for s, v in pinned.items() if lo <= s <= hi}, batch_size)
        for lo, hi in bounds
    ]
    # Forked children must not share the parent's database socket.
    connections.close_all()
    with multiprocessing.get_context("fork").Pool(len(jobs)) as pool:
        return list(pool.map(_walk_range_in_worker, jobs))


def first_problem(walks: list[_RangeWalk]) -> tuple[ChainProblem | None, int, str]:
    """Join range walks in seq order: the first problem, events checked, and the last hash."""
    checked = 0
    prev_hash = GENESIS_HASH
    for walk in walks:
        own = walk.problem
        # In one pass, event lo's hash is checked before its link: keep that order.
        own_first = own is not None and own.seq == walk.lo and own.kind in (GAP, HASH_MISMATCH)
        if not own_first and walk.first_prev_hash is not None and walk.first_prev_hash != prev_hash:
            return _broken_link(walk.lo), checked, prev_hash
        checked += walk.checked
        if own is not None:
            return own, checked, prev_hash
        prev_hash = walk.last_hash
    return None, checked, prev_hash


# --- the whole verification --------------------------------------------------------------------
