"""Which changes need a second person, and why: the one place that decides it.

A kind may always need approval (APPROVAL_REQUIRED_KINDS: model swaps by default; an engine
repair always, whatever that setting says, since it runs pip as root). Beyond that,
any change to what serves or how it is exposed needs the same approval, whatever kind carries
it: the unit the change would write is compared with the unit that serves now, over everything
that decides what runs and how it is exposed (serving_plan.unit_differences), a rollback's
earlier revision like any other. Only differences in flags an administrator listed in
HARMLESS_ENGINE_FLAGS, and in directives units.HARMLESS_DIRECTIVES lists, go without.

A deployment's drain grace goes without too, though it is written from the deployment's field
only (vLLM's --shutdown-timeout is reserved) and the review shows it: it decides how long a
stopping server lets the requests in flight finish before aborting them, and the stop timeout
systemd waits (TimeoutStopSec=, a harmless directive), nothing about what serves, its numerics,
or who can reach it. At worst a stop takes that long, which is the point of it.
"""

from __future__ import annotations

from django.conf import settings

from . import kinds
from .revisions import ChangeTarget
from .unit_files import serving_plan


def approval_reasons(*, target: ChangeTarget) -> list[str]:
    """Why this change needs a second person; empty when it does not."""
    reasons = []
    declared = kinds.spec(target.kind)
    if target.kind in settings.APPROVAL_REQUIRED_KINDS or declared.always_approved:
        reasons.append(f"every {declared.label} needs a second person")
    if not target.writes_unit or target.unit_text == target.current.unit_text:
        return reasons
    changes = serving_plan.unit_differences(
        target.current.unit_text,
        target.unit_text,
        before_variables=target.current.file_variables,
        after_variables=target.file_variables,
        harmless=settings.HARMLESS_ENGINE_FLAGS,
    )
    reasons += [f"{c.describe()} ({c.why})" for c in changes if c.why]
    return reasons
