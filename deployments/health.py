"""A host's health verdict, from all the evidence, in one place. Pure: evidence in, verdict out.

healthy: everything the control plane can see checks out. changing: a change job of the control
plane's own is running on the host, and what is off is what that change does on its way (the
unit stopped or starting, the model loading, /health refused, the unit file of the change's
target or previous revision in place, the model of either one served). degraded: it serves, but
something an engineer would want to know is off (patched engine files, a rolled-back change,
drift from the deployed revision, facts it could not read, a foreign process on the GPUs).
failed: it does not serve as declared (unit failed or missing, GPU driver down, fewer GPUs than
the parallelism needs, a failed change, an incoherent model, a changed host key). unknown: the
control plane cannot tell (never probed, unreachable, no recent snapshot, host key not
accepted); the last known good state is named so that nobody reads "unknown" as "fine".

A running change explains only what it does: a fault it does not (a GPU error, an unreachable
host, a failed unit, a unit file or a model of neither revision) keeps its own level, so such a
host is degraded, unknown or failed while the change runs, not changing.

deployments.services.verdicts gathers the evidence and stores the verdict; every page, /metrics
and the webhooks read the stored verdict, never recompute it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from hosts.choices import READ_STATUSES, HostKeyStatus, Verdict
from hosts.choices import VERDICT_SEVERITY as SEVERITY
from hosts.probe_sections import GPU_DETAILS, GPUS
from hosts.state import HostState

from .choices import ChangeStatus
from .engine_faults import ServingUnit, engine_reasons, not_serving_reasons
from .gpu_faults import diagnostic_reasons, gpu_fault_reasons
from .health_evidence import (
    ChangeOutcome,
    Evaluation,
    HostEvidence,
    RunningChange,
    SnapshotFacts,
    UnitEvidence,
)
from .verdict_table import Reason

__all__ = [
    "ChangeOutcome",
    "Evaluation",
    "HealthVerdict",
    "HostEvidence",
    "Reason",
    "RunningChange",
    "SnapshotFacts",
    "UnitEvidence",
    "evaluate",
]

HEALTHY, CHANGING, DEGRADED, UNKNOWN, FAILED = (
    Verdict.HEALTHY,
    Verdict.CHANGING,
    Verdict.DEGRADED,
    Verdict.UNKNOWN,
    Verdict.FAILED,
)
# A snapshot older than this many probe intervals (plus a minute) no longer tells the truth.
STALE_INTERVALS = 3


@dataclass(frozen=True)
class HealthVerdict:
    verdict: str
    reasons: tuple[Reason, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reasons": [r.as_dict() for r in self.reasons]}


def evaluate(evidence: HostEvidence) -> HealthVerdict:
    reasons = _host_reasons(evidence) + _running_reasons(evidence)
    snapshot = evidence.snapshot
    if snapshot is not None and snapshot.status in READ_STATUSES:
        previous = evidence.previous.state if evidence.previous is not None else None
        reasons += _snapshot_reasons(snapshot)
        reasons += gpu_fault_reasons(snapshot.state, previous)
        diagnosed = evidence.gpu_diagnostic
        if diagnosed is not None and diagnosed.state.gpu_diagnostic is not None:
            age = _age(evidence.now, diagnosed.taken_at)
            reasons += diagnostic_reasons(diagnosed.state.gpu_diagnostic, diagnosed.pk, age)
        for unit in evidence.units:
            reasons += _unit_reasons(unit, snapshot.state, previous)
    if not reasons:
        return HealthVerdict(HEALTHY)
    worst = max(reasons, key=lambda r: SEVERITY[r.level]).level
    ordered = sorted(reasons, key=lambda r: -SEVERITY[r.level])
    return HealthVerdict(worst, tuple(ordered))


def _age(now: dt.datetime, then: dt.datetime) -> str:
    seconds = max(0, int((now - then).total_seconds()))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


def _host_reasons(evidence: HostEvidence) -> list[Reason]:
    """Whether the control plane can see the host at all."""
    if evidence.key_status == HostKeyStatus.CHANGED:
        return [
            Reason(
                FAILED,
                "host_key_changed",
                "the host key changed: every command is "
                "blocked until an administrator accepts the new key",
            )
        ]
    if evidence.key_status == HostKeyStatus.UNKNOWN:
        return [Reason(UNKNOWN, "host_key_unknown", "the host key is not accepted yet")]
    snapshot = evidence.snapshot
    if snapshot is None:
        return [Reason(UNKNOWN, "never_probed", "never probed")]
    now = evidence.now
    if snapshot.status not in READ_STATUSES:
        last = evidence.last_good
        known = (
            f"; last known good: snapshot #{last.pk}, {_age(now, last.taken_at)} ago"
            if last is not None
            else "; no good snapshot on record"
        )
        text = f"{snapshot.status.replace('_', ' ')} for {_age(now, snapshot.taken_at)}"
        detail = f"; {snapshot.error[:160]}" if snapshot.error else ""
        return [Reason(UNKNOWN, snapshot.status, f"{text}{known}{detail}")]
    limit = dt.timedelta(seconds=STALE_INTERVALS * evidence.probe_interval_seconds + 60)
    if now - snapshot.taken_at > limit:
        return [
            Reason(
                UNKNOWN,
                "stale",
                f"no snapshot for {_age(now, snapshot.taken_at)} "
                f"(probes every {evidence.probe_interval_seconds} s)",
            )
        ]
    return []


def _running_reasons(evidence: HostEvidence) -> list[Reason]:
    """A change job running on the host is evidence too: the verdict says so, and is at least
    `changing` while it runs."""
    reasons = []
    for unit in evidence.units:
        change = unit.running
        if change is None:
            continue
        since = ""
        if change.started_at is not None:
            since = (
                f" since {change.started_at:%H:%M:%S} UTC ({_age(evidence.now, change.started_at)})"
            )
        reasons.append(
            Reason(
                CHANGING,
                "change_running",
                f"{change.said} is running on {unit.unit}{since}, requested by {change.by}",
            )
        )
    return reasons


def _snapshot_reasons(snapshot: SnapshotFacts) -> list[Reason]:
    """Sections of the probe that could not be read: one reason per distinct error (a driver
    failure fails every nvidia-smi section with the same message)."""
    sections: dict[str, list[str]] = {}
    for problem in snapshot.state.problems:
        sections.setdefault(problem.message, []).append(problem.section)
    reasons = []
    for message, names in sections.items():
        if {GPUS.name, GPU_DETAILS.name} & set(names) and not snapshot.state.gpus:
            reasons.append(Reason(FAILED, "gpu_driver", f"GPUs unreadable: {message}"))
        else:
            reasons.append(Reason(DEGRADED, "unreadable", f"{', '.join(names)}: {message}"))
    return reasons


def _unit_reasons(
    unit: UnitEvidence, state: HostState, previous: HostState | None = None
) -> list[Reason]:
    service = _service_reasons(unit, state)
    if not service and unit.running is None:  # it looks as if it serves: does the engine?
        service = engine_reasons(unit.unit, unit.gpus_needed, state, previous)
    return [
        *service,
        *_gpu_reasons(unit, state),
        *_drift_reasons(unit, state),
        *_integrity_reasons(unit),
        *_change_reasons(unit),
        *_evaluation_reasons(unit),
    ]


def _service_reasons(unit: UnitEvidence, state: HostState) -> list[Reason]:
    name = unit.unit
    service = state.unit_state(name)
    if service.load_state in (None, "not-found"):
        return [Reason(FAILED, "unit_missing", f"{name} is not on the host")]
    active = service.active_state
    if active == "failed":
        return [Reason(FAILED, "service_failed", f"{name} failed")]
    if active in {"inactive", "deactivating"}:
        change = unit.last_change
        if unit.running is not None:
            return [
                Reason(
                    CHANGING,
                    "service_changing",
                    f"{name} is {active} while {unit.running.said} runs",
                )
            ]
        if (
            change is not None
            and change.leaves_unit_stopped
            and change.status == ChangeStatus.SUCCEEDED
        ):
            return [
                Reason(DEGRADED, "stopped", f"{name} stopped by change #{change.pk} ({change.by})")
            ]
        return [Reason(FAILED, "service_inactive", f"{name} is {active}")]
    if active == "activating" or not state.server(name).healthy:
        serving = ServingUnit(
            name=name,
            port=unit.plan.port if unit.plan is not None else None,
            running=unit.running.said if unit.running is not None else None,
            load_timeout_seconds=unit.load_timeout_seconds,
        )
        return not_serving_reasons(serving, state, active or "unknown")
    return []


def _gpu_reasons(unit: UnitEvidence, state: HostState) -> list[Reason]:
    reasons = []
    needed = unit.plan.gpus_needed if unit.plan is not None else 0
    if state.gpus and len(state.gpus) < needed:
        reasons.append(
            Reason(
                FAILED,
                "gpus_missing",
                f"{len(state.gpus)} GPUs visible; {unit.unit} needs {needed}",
            )
        )
    foreign = {a.pid: a for apps in state.foreign_processes(unit.unit).values() for a in apps}
    if foreign:
        shown = ", ".join(
            f"{a.process_name} (pid {a.pid}, {a.unit or 'unknown unit'})"
            for a in list(foreign.values())[:3]
        )
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        reasons.append(
            Reason(
                DEGRADED,
                "foreign_gpu_processes",
                f"GPU processes outside {unit.unit}: {shown}{more}",
            )
        )
    return reasons


def _drift_reasons(unit: UnitEvidence, state: HostState) -> list[Reason]:
    """What serves differs from the revision the control plane believes is deployed."""
    reasons = []
    running = unit.running
    dep = state.deployments.get(unit.unit)
    actual = dep.unit_file_sha256 if dep is not None else None
    if (
        unit.expected_unit_sha256
        and actual
        and actual != unit.expected_unit_sha256
        and not (running is not None and actual in running.unit_sha256s)
    ):
        text = f"{unit.unit} differs from the deployed revision (edited on the host)"
        if running is not None:
            text = (
                f"{unit.unit} is neither revision of {running.said}, the one it writes nor the "
                "one it replaces (edited on the host)"
            )
        reasons.append(Reason(DEGRADED, "unit_file_drift", text))
    plan, server = unit.plan, state.server(unit.unit)
    if (
        plan is not None
        and plan.model
        and server.healthy
        and server.model_roots
        and plan.model not in server.model_roots
        and not (running is not None and running.models & set(server.model_roots))
    ):
        reasons.append(
            Reason(
                FAILED,
                "model_drift",
                f"serves {', '.join(server.model_roots)}; "
                f"the deployed revision serves {plan.model}",
            )
        )
    return reasons


def _integrity_reasons(unit: UnitEvidence) -> list[Reason]:
    report = unit.integrity
    if report is None:
        return []
    if report.error:
        return [Reason(DEGRADED, "integrity_unreadable", f"engine check: {report.error}")]
    if report.clean:
        return []
    parts = []
    for label, files in (
        ("modified", report.modified),
        ("missing", report.missing),
        ("added", report.added),
    ):
        if files:
            parts.append(f"{len(files)} {label} ({', '.join(files[:2])})")
    engine = f"{report.dist} {report.version}" if report.dist else "the engine"
    return [
        Reason(DEGRADED, "engine_patched", f"{engine} differs from its install: {'; '.join(parts)}")
    ]


def _change_reasons(unit: UnitEvidence) -> list[Reason]:
    change = unit.last_change
    if change is None:
        return []
    said = f"change #{change.pk} ({change.kind}, {change.by})"
    if change.status == ChangeStatus.FAILED:
        return [Reason(FAILED, "change_failed", f"{said} failed: {change.reason[:200]}")]
    if change.status == ChangeStatus.ROLLED_BACK:
        return [
            Reason(DEGRADED, "change_rolled_back", f"{said} was rolled back: {change.reason[:200]}")
        ]
    if change.status == ChangeStatus.INTERRUPTED:
        return [
            Reason(
                DEGRADED,
                "change_interrupted",
                f"{said} was interrupted; check the host before the next change",
            )
        ]
    return []


def _evaluation_reasons(unit: UnitEvidence) -> list[Reason]:
    evaluation = unit.evaluation
    if evaluation is None:
        return []
    reasons = []
    if evaluation.coherent is False:
        failed = ", ".join(evaluation.failures[:3]) or "the coherence suite"
        reasons.append(Reason(FAILED, "incoherent", f"{unit.model_label} failed {failed}"))
    ratio = evaluation.throughput_ratio
    if ratio is not None and ratio < 0.9:
        reasons.append(
            Reason(
                DEGRADED,
                "slow",
                f"{unit.model_label} serves {ratio:.0%} of its revision's baseline throughput",
            )
        )
    return reasons
