"""Which changes need a second person, and why: the one place that decides it.

A kind may always need approval (APPROVAL_REQUIRED_KINDS: model swaps by default; an engine
repair always, whatever that setting says, since it runs pip as root). Beyond that,
any change to what serves or how it is exposed needs the same approval, whatever kind carries
it: the unit the change would write is read as the engine reads it and compared with the unit
that serves now. Only differences in flags an administrator listed in HARMLESS_ENGINE_FLAGS go
without.
"""

from __future__ import annotations

from django.conf import settings

from . import serving_plan, units
from .choices import ALWAYS_APPROVED_KINDS, ChangeKind
from .revisions import ChangeTarget


def approval_reasons(*, target: ChangeTarget) -> list[str]:
    """Why this change needs a second person; empty when it does not."""
    reasons = []
    if target.kind in settings.APPROVAL_REQUIRED_KINDS or target.kind in ALWAYS_APPROVED_KINDS:
        reasons.append(f"every {ChangeKind(target.kind).label} needs a second person")
    if not target.writes_unit or target.unit_text == target.current.unit_text:
        return reasons
    changes = serving_plan.plan_changes(
        target.current.plan, target.plan, harmless=settings.HARMLESS_ENGINE_FLAGS
    )
    reasons += [f"{c.describe()} ({c.why})" for c in changes if c.why]
    before, after = (
        units.environment_of(target.current.unit_text),
        units.environment_of(target.unit_text),
    )
    for name in sorted(set(before) | set(after)):
        if before.get(name) != after.get(name):
            reasons.append(
                f"environment {name}: {before.get(name, 'unset')} → {after.get(name, 'unset')} "
                "(changes how the engine runs)"
            )
    return reasons
