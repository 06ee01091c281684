"""What changed between the snapshot a decision rested on and the host right before acting.

The host's material fingerprint (units, PIDs, models, unit files, GPU processes and who owns
them) is compared field by field; then the decision's own facts are re-checked on the fresh
snapshot: the target still fits in what the GPUs have free, and no requests went in flight on a
server the request did not acknowledge as busy (unless it drains first, and so waits for them).
Each difference is one line of the drift report.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from hosts.models import StateSnapshot
from hosts.probe_sections import unknown_fingerprint_fields
from hosts.state import fingerprint_drift

from .. import engine_repair, fit, kinds
from ..models import ChangeRequest


def execution_drift(
    *, change: ChangeRequest, basis: StateSnapshot, current: StateSnapshot
) -> list[dict[str, Any]]:
    """The drift report; empty when it is still safe to act on what was decided."""
    then, now = basis.state(), current.state()
    report = fingerprint_drift(basis.material_fingerprint(), current.material_fingerprint())
    if change.rests_on_partial:
        # Facts the requester acknowledged as unknown cannot have drifted: they were never known.
        unknown = unknown_fingerprint_fields({p.section for p in then.problems})
        report = [r for r in report if not (unknown and r["field"].startswith(unknown))]
    unit = change.deployment.unit
    inflight = now.inflight(unit)
    # A change that drains first waits for them instead (deployments.execution.drain).
    drains = "drain" in (change.params or {})
    if inflight and not change.busy_acknowledged and not drains:
        report.append(
            {
                "field": f"{unit} requests in flight",
                "before": then.inflight(unit),
                "after": inflight,
                "why": "the request did not acknowledge a busy server; acting now drops them",
            }
        )
    declared = kinds.spec(change.kind)
    if declared.reinstalls_engine:
        report += _engine_version_drift(change, current)
    revision = change.target_revision or change.from_revision
    # Without GPU facts (acknowledged by the requester) there is no fit to recompute.
    gpus_unknown = change.rests_on_partial and not now.gpus
    if declared.serves and revision is not None and not gpus_unknown:
        plan = revision.plan
        now_fit = fit.model_fits(
            state=now,
            weights_gib=revision.model.weights_gib,
            plan=plan,
            unit=unit,
            kv_reserve_gib=settings.KV_CACHE_RESERVE_GIB,
        )
        if not now_fit.fits:
            was = fit.model_fits(
                state=then,
                weights_gib=revision.model.weights_gib,
                plan=plan,
                unit=unit,
                kv_reserve_gib=settings.KV_CACHE_RESERVE_GIB,
            )
            report.append(
                {
                    "field": f"{revision.model} fits",
                    "before": was.message,
                    "after": now_fit.message,
                    "why": "GPU memory re-checked on the fresh snapshot",
                }
            )
    return report


def _engine_version_drift(change: ChangeRequest, current: StateSnapshot) -> list[dict[str, Any]]:
    """An engine repair reinstalls the version the decision's integrity check found: if the
    engine installed now is another (or cannot be read), that is not what was approved."""
    package = (change.params or {}).get("engine_package") or {}
    decided = f"{package.get('dist')}=={package.get('version')}"
    report = engine_repair.integrity_report(current.state(), change.deployment.unit)
    found = (
        f"{report.dist}=={report.version}"
        if report is not None and report.version
        else f"unreadable ({report.error if report is not None else 'not checked'})"
    )
    if found == decided:
        return []
    return [
        {
            "field": f"{change.deployment.unit} engine package",
            "before": decided,
            "after": found,
            "why": "an engine repair reinstalls exactly the version that was decided on",
        }
    ]
