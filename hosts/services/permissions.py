"""Who may do what to a host, decided here once for the pages, the API and the templates."""

from __future__ import annotations

from typing import Any

from controlplane.accounts.roles import APPROVER, OPERATOR, has_role
from controlplane.refusals import Refused


class HostRefused(Refused):
    """A rule about hosts refused an action (probing, accepting a host key)."""


def user_may_probe(user: Any) -> bool:
    """Probing is read-only: operators probe before they request, approvers before they
    approve."""
    return has_role(user, OPERATOR) or has_role(user, APPROVER)


def require_probe_permission(user: Any) -> None:
    if not user_may_probe(user):
        raise HostRefused("Probing needs the operator or approver role.", code="forbidden")


def user_may_accept_host_keys(user: Any) -> bool:
    return bool(getattr(user, "is_superuser", False))
