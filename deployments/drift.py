"""What changed between the snapshot a decision rested on and the host right before acting.

The host's material fingerprint (units, PIDs, models, unit files, GPU processes and who owns
them) is compared field by field; then the decision's own facts are re-checked on the fresh
snapshot: the target still fits in what the GPUs have free, and no requests went in flight on a
server the request did not acknowledge as busy. Each difference is one line of the drift report.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from hosts.models import StateSnapshot
from hosts.state import fingerprint_drift

from . import fit, serving_plan
from .choices import SERVING_KINDS
from .models import ChangeRequest


def execution_drift(
    *, change: ChangeRequest, basis: StateSnapshot, current: StateSnapshot
) -> list[dict[str, Any]]:
    """The drift report; empty when it is still safe to act on what was decided."""
    report = fingerprint_drift(basis.material_fingerprint(), current.material_fingerprint())
    unit = change.deployment.unit
    then, now = basis.state(), current.state()
    inflight = now.inflight(unit)
    if inflight and not change.busy_acknowledged:
        report.append(
            {
                "field": f"{unit} requests in flight",
                "before": then.inflight(unit),
                "after": inflight,
                "why": "the request did not acknowledge a busy server; acting now drops them",
            }
        )
    revision = change.target_revision or change.from_revision
    if change.kind in SERVING_KINDS and revision is not None:
        plan = serving_plan.plan_from_unit_text(revision.unit_text)
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
