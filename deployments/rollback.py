"""What a rollback goes back to: any revision the deployment served before (numbered: its unit
reached the host, or was adopted from it) but the one deployed now, the one before it by
default. Writing it back byte for byte is deployments.revisions' and the plan's."""

from __future__ import annotations

from .models import Deployment, DeploymentRevision


def rollback_target(deployment: Deployment) -> DeploymentRevision | None:
    """The revision that was live before the current one."""
    current = deployment.current_revision
    if current is None or current.created_from_change is None:
        return None
    return current.created_from_change.from_revision


class NoRollbackTarget(Exception):
    """There is no earlier revision to roll back to."""


class RevisionNotServed(NoRollbackTarget):
    """The revision a rollback names is not one this deployment served before the current one."""


def rollback_choices(deployment: Deployment) -> list[DeploymentRevision]:
    """What a rollback may go back to: every revision the deployment served (numbered: its unit
    reached the host, or was adopted from it) but the one deployed now, newest first."""
    served = deployment.revisions.filter(number__isnull=False).select_related("model")
    if deployment.current_revision_id is not None:
        served = served.exclude(pk=deployment.current_revision_id)
    return list(served.order_by("-number"))


def rollback_revision(
    deployment: Deployment, current: DeploymentRevision, chosen: DeploymentRevision | None
) -> DeploymentRevision:
    """The revision a rollback writes: `chosen`, if it is one this deployment served and not
    the current one; by default the one that was live before the current one."""
    if chosen is None:
        target = rollback_target(deployment)
        if target is not None:
            return target
        others = rollback_choices(deployment)
        if not others:
            raise NoRollbackTarget("there is no earlier revision to roll back to")
        numbers = ", ".join(str(r.number) for r in others)
        raise NoRollbackTarget(
            f"revision {current.number} was not made by a change, so there is no revision one "
            f"back: choose the one to roll back to ({numbers})"
        )
    if chosen.deployment_id != deployment.pk:
        other = chosen.deployment
        raise RevisionNotServed(
            f"that revision belongs to {other.unit} on {other.host.name}, not to "
            f"{deployment.unit} on {deployment.host.name}"
        )
    if chosen.number is None:
        raise RevisionNotServed(
            "that revision never reached the host (its request was not carried out): only a "
            "revision the deployment served can be rolled back to"
        )
    if chosen.pk == current.pk:
        raise RevisionNotServed(
            f"revision {chosen.number} is the one deployed now: there is nothing to go back to"
        )
    return chosen
