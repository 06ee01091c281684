"""The change rules templates ask about, per host, answered by the services' own checks: a page
offers "Restart", "Approve", "Cancel" or "Run GPU diagnostic" only where the action would be
allowed (`{% if user|may_request:host %}`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import template

from deployments import services
from deployments.models import ChangeRequest, Deployment
from deployments.services.integrity import IntegrityFinding, nothing_to_repair
from hosts.models import Host

register = template.Library()


def _allowed(check: Callable[[], None]) -> bool:
    try:
        check()
    except services.ChangeRefused:
        return False
    return True


@register.filter
def may_request(user: Any, host: Host) -> bool:
    return _allowed(lambda: services.change_request_create_allowed(user=user, host=host))


@register.filter
def may_approve(user: Any, host: Host) -> bool:
    return _allowed(lambda: services.change_request_approve_allowed(user=user, host=host))


@register.filter
def may_cancel(user: Any, change: ChangeRequest) -> bool:
    return _allowed(lambda: services.change_request_cancel_allowed(change=change, user=user))


@register.filter
def may_run_gpu_diagnostic(user: Any, host: Host) -> bool:
    return _allowed(lambda: services.gpu_diagnostic_allowed(user=user, host=host))


@register.filter
def engine_clean(deployment: Deployment) -> IntegrityFinding | None:
    """The integrity check that found the engine clean ("nothing to repair"), or None."""
    return nothing_to_repair(deployment)
