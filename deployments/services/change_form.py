"""What the change form and the approver's review show: the snapshot the decision rests on and
whether it may, the target, the pre-flight on it, and whether approval is needed. The pages
render these facts; the rules stay in the services they come from (freshness, change_check)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from hosts import selectors as host_selectors
from hosts import services as host_services
from hosts.choices import SnapshotStatus
from hosts.models import Host, StateSnapshot

from .. import kinds
from ..evaluation import comparison
from ..models import ChangeRequest, Deployment, ModelArtifact
from .preflight import ChangeCheck, change_acknowledgements, change_check, change_review
from .refusals import ChangeRefused

# The form's card that says each kind of refusal (ChangeRefused.shown_in), by its context key.
CARDS = {"snapshot": "refusal", "target": "target_error", "preflight": "preflight"}


def snapshot_facts(
    host: Host, snapshot: StateSnapshot | None, *, allow_partial: bool = False
) -> dict[str, Any]:
    """The snapshot a decision is made on, and why it may not back one (the words of
    hosts.services.snapshot_require_fresh, which decides)."""
    refusal = None
    if snapshot is None:
        refusal = "This host has never been probed."
    else:
        try:
            host_services.snapshot_require_fresh(
                snapshot=snapshot, host=host, allow_partial=allow_partial
            )
        except host_services.SnapshotNotUsable as exc:
            refusal = exc.message
    partial = snapshot is not None and snapshot.status == SnapshotStatus.PARTIAL
    return {
        "snapshot": snapshot,
        "summary": host_selectors.snapshot_summary(snapshot),
        "refusal": refusal,
        "unknown": host_services.unknown_facts(snapshot) if snapshot and partial else [],
        "max_age": settings.SNAPSHOT_MAX_AGE_SECONDS,
    }


def change_form_facts(
    *,
    deployment: Deployment,
    kind: str,
    snapshot: StateSnapshot | None,
    arguments: dict[str, Any],
    field_error: str | None = None,
) -> dict[str, Any]:
    """Everything the change form shows for what is typed so far (`arguments`, as the form
    parses them; `field_error`, the first field it could not)."""
    declared = kinds.spec(kind)
    facts = snapshot_facts(deployment.host, snapshot, allow_partial=declared.partial_snapshot_ok)
    model = arguments.get("model") if declared.takes_model else None
    check = ChangeCheck(target_error=field_error)
    # A swap's pre-flight is about the model it swaps to: none until one is picked.
    if field_error is None and (not declared.takes_model or model is not None):
        check = change_check(deployment=deployment, kind=kind, snapshot=snapshot, **arguments)
    target = check.target
    facts.update(
        deployment=deployment,
        host=deployment.host,
        kind=kind,
        kind_label=declared.label,
        kind_spec=declared,
        preflight=check.preflight,
        pick_model=declared.takes_model and model is None and field_error is None,
        needs_approval=bool(check.approval_because),
        approval_because=check.approval_because,
        target=target,
        target_error=check.target_error,
        rollback_target=target.revision if target is not None else None,
        models=ModelArtifact.objects.all(),
        acknowledgements=change_acknowledgements(
            deployment=deployment,
            kind=kind,
            snapshot=snapshot,
            preflight=check.preflight,
            drains=arguments.get("drain_hook") is not None,
        ),
    )
    return facts


def refusal_shown(facts: dict[str, Any], refusal: ChangeRefused) -> bool:
    """Whether the form's facts already show `refusal` on a card of their own."""
    card = CARDS.get(refusal.shown_in or "")
    return card is not None and bool(facts.get(card))


def change_review_facts(change: ChangeRequest) -> dict[str, Any]:
    """What the approver decides on: the latest snapshot, the pre-flight re-checked on it, and
    the unit file the change would write, as a diff against the one serving."""
    latest = host_selectors.latest_snapshot(change.host)
    review = snapshot_facts(change.host, latest, allow_partial=change.rests_on_partial)
    if latest is not None:
        review["preflight"] = change_review(change=change, snapshot=latest)
    source, target = change.from_revision, change.target_revision
    return {
        "review": review,
        "review_snapshot": latest,
        "unit_diff": comparison.unit_diff(source, target) if source and target else [],
        "unit_review": comparison.unit_review(source, target) if source and target else [],
    }
