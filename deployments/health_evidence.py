"""The evidence a host's health verdict is computed from (deployments.health.evaluate), as plain
frozen values: deployments.services.verdicts gathers it from the rows, tests build it by hand."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from hosts.state import HostState, IntegrityReport

from .unit_files.serving_plan import ServingPlan


@dataclass(frozen=True)
class ChangeOutcome:
    pk: int
    kind: str  # as people read it: "model swap"
    status: str
    reason: str
    by: str
    finished_at: dt.datetime | None
    # Its kind leaves the unit inactive when it succeeds (deployments.kinds: a stop).
    leaves_unit_stopped: bool = False


@dataclass(frozen=True)
class RunningChange:
    """The change job running on the unit now, and what it may leave on the host on its way:
    the unit files and models of its target revision and of the one it replaces (a failed
    verification puts that one back)."""

    pk: int
    kind: str  # as people read it: "model swap"
    by: str
    started_at: dt.datetime | None
    unit_sha256s: frozenset[str] = frozenset()
    models: frozenset[str] = frozenset()

    @property
    def said(self) -> str:
        return f"change #{self.pk} ({self.kind})"


@dataclass(frozen=True)
class Evaluation:
    """The latest coherence suite / benchmark of the serving revision, against its baseline."""

    coherent: bool | None = None
    failures: tuple[str, ...] = ()
    throughput_ratio: float | None = None  # measured / the revision's own baseline
    at: dt.datetime | None = None


@dataclass(frozen=True)
class UnitEvidence:
    unit: str
    model_label: str  # "moonshotai/Kimi-K2.5 (INT4)"
    plan: ServingPlan | None  # what the deployed revision serves
    expected_unit_sha256: str | None
    last_change: ChangeOutcome | None = None
    integrity: IntegrityReport | None = None
    evaluation: Evaluation | None = None
    running: RunningChange | None = None  # the change job running on this unit now
    load_timeout_seconds: int = 900  # how long its model may take to load (Deployment's)
    # The GPUs the deployment declares (tensor-parallel size), for a unit with no revision yet.
    declared_gpus: int = 0

    @property
    def gpus_needed(self) -> int:
        return self.plan.gpus_needed if self.plan is not None else self.declared_gpus


@dataclass(frozen=True)
class SnapshotFacts:
    pk: int
    status: str
    taken_at: dt.datetime
    error: str
    state: HostState


@dataclass(frozen=True)
class HostEvidence:
    name: str
    key_status: str  # hosts.choices.HostKeyStatus
    probe_interval_seconds: int
    now: dt.datetime
    snapshot: SnapshotFacts | None
    last_good: SnapshotFacts | None = None
    units: tuple[UnitEvidence, ...] = ()
    # The ok or partial snapshot before `snapshot`, where a rule compares two probes (NVLink
    # counters, a stalled engine); None where none is needed or there is none.
    previous: SnapshotFacts | None = None
    # The newest snapshot holding DCGM's diagnostic, weighed until the next one.
    gpu_diagnostic: SnapshotFacts | None = None
