"""Which changes need a second person, and why: the one place that decides it.

A kind may always need approval (APPROVAL_REQUIRED_KINDS: model swaps by default). Beyond that,
any change to what serves or how it is exposed needs the same approval, whatever kind carries
it: the unit the change would write is read as the engine reads it and compared with the unit
that serves now. Only differences in flags an administrator listed in HARMLESS_ENGINE_FLAGS go
without.
"""

from __future__ import annotations

from django.conf import settings

from . import serving_plan
from .choices import ChangeKind


def approval_reasons(
    *, kind: str, current_unit_text: str, target_unit_text: str | None
) -> list[str]:
    """Why this change needs a second person; empty when it does not."""
    reasons = []
    if kind in settings.APPROVAL_REQUIRED_KINDS:
        reasons.append(f"every {ChangeKind(kind).label} needs a second person")
    if target_unit_text is not None and target_unit_text != current_unit_text:
        changes = serving_plan.plan_changes(
            serving_plan.plan_from_unit_text(current_unit_text),
            serving_plan.plan_from_unit_text(target_unit_text),
            harmless=settings.HARMLESS_ENGINE_FLAGS,
        )
        reasons += [f"{c.describe()} ({c.why})" for c in changes if c.why]
    return reasons
