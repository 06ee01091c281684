"""Walking the chain and its checkpoints: is the log what was written, all of it?

Reads only. `services.verification_run` stores the outcome; `verify_audit`, the beat task and
the history page all rely on the same `chain_verify`.

Speed matters (a million events should take seconds), so rows are read with plain SQL in seq
batches rather than through the ORM, the next batch is fetched while this one is hashed, and
on PostgreSQL a large log is split into seq ranges walked by several processes at once.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

from . import checkpoints as cp
from .chain import GENESIS_HASH
from .chain_walk import (
    HEAD_MISMATCH,
    MISSING_AFTER_CHECKPOINT,
    ChainProblem,
    first_problem,
    walk_chain,
)


@dataclass(frozen=True)
class VerificationResult:
    ok: bool
    events: int
    head_seq: int
    head_hash: str
    checkpoints: int
    broken_seq: int | None = None
    problem: str = ""
    reason: str = ""
    duration_seconds: float = 0.0
    last_checkpoint: cp.Checkpoint | None = field(default=None)

    @property
    def events_per_second(self) -> float:
        return self.events / self.duration_seconds if self.duration_seconds else 0.0

    def summary(self) -> str:
        if self.ok:
            return (
                f"OK: {self.events} events, head #{self.head_seq} {self.head_hash}, "
                f"{self.checkpoints} checkpoints"
            )
        return f"BROKEN at #{self.broken_seq} ({self.problem}): {self.reason}"

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["last_checkpoint"] = self.last_checkpoint.body() if self.last_checkpoint else None
        return out


def chain_verify(
    *,
    checkpoint_path: Path | None = None,
    batch_size: int = 10_000,
    workers: int | None = None,
    using: str = DEFAULT_DB_ALIAS,
) -> VerificationResult:
    """Walk every event in seq order, then hold the result against the signed checkpoints.

    Names the first sequence number of: an event that no longer matches its hash, a gap in
    the sequence, a prev_hash that is not the previous event's hash, a log that ends before
    the head row or a checkpoint says it should, a checkpoint that does not match the event at
    its seq (the chain was recomputed), or a checkpoint whose signature or link to the
    previous checkpoint is wrong.
    """
    started = time.perf_counter()
    # Checkpoints first, the head second: a checkpoint written in between then never claims
    # more than the head we walk to.
    try:
        found = cp.load(checkpoint_path)
        cp.check(found, cp.trusted_keys())
    except cp.CheckpointProblem as exc:
        return VerificationResult(
            ok=False, events=0, head_seq=0, head_hash="", checkpoints=0, broken_seq=exc.seq,
            problem=exc.problem, reason=exc.reason, duration_seconds=time.perf_counter() - started,
        )  # fmt: skip
    last_checkpoint = found[-1] if found else None
    head_seq, head_hash = _head(using)
    pinned = {c.seq: (c.line, c.hash) for c in found if c.seq <= head_seq}
    problem, checked, last_hash = first_problem(
        walk_chain(using, head_seq, pinned, batch_size, workers)
    )
    if problem is None:
        problem = _tail_problem(head_seq, head_hash, last_hash, last_checkpoint)
    return VerificationResult(
        ok=problem is None,
        events=checked,
        head_seq=head_seq,
        head_hash=head_hash,
        checkpoints=len(found),
        broken_seq=problem.seq if problem else None,
        problem=problem.kind if problem else "",
        reason=problem.reason if problem else "",
        duration_seconds=time.perf_counter() - started,
        last_checkpoint=last_checkpoint,
    )


def _head(using: str) -> tuple[int, str]:
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT seq, hash FROM audit_auditchainhead WHERE id = 1")
        row = cursor.fetchone()
    return (row[0], row[1]) if row else (0, GENESIS_HASH)


def _tail_problem(
    head_seq: int, head_hash: str, last_hash: str, last_checkpoint: cp.Checkpoint | None
) -> ChainProblem | None:
    """What the walk cannot see by itself: a tail cut off after the head row was written, or
    behind a signed checkpoint."""
    if head_seq and last_hash != head_hash:
        return ChainProblem(
            head_seq,
            HEAD_MISMATCH,
            f"event #{head_seq} does not match the hash the chain head recorded for it",
        )
    if last_checkpoint is not None and last_checkpoint.seq > head_seq:
        return ChainProblem(
            head_seq + 1,
            MISSING_AFTER_CHECKPOINT,
            f"checkpoint line {last_checkpoint.line} ({last_checkpoint.time}) signed "
            f"#{last_checkpoint.seq}, but the log ends at #{head_seq}: events "
            f"#{head_seq + 1}..#{last_checkpoint.seq} are missing",
        )
    return None
