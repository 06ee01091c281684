"""Who may do what to a host, decided here once for the pages, the API and the templates.

A role is held everywhere or on host groups (controlplane.accounts.roles); hosts.scope says
which roles hold on one host. Without a host, the functions below answer the first gate (the
role anywhere), which pages and API views ask before they read any input.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from controlplane.accounts.roles import APPROVER, OPERATOR, has_role
from controlplane.refusals import Refused

from ..models import Host
from ..scope import roles_on_host

# Probing is read-only: operators probe before they request, approvers before they approve.
PROBE_ROLES = (OPERATOR, APPROVER)


class HostRefused(Refused):
    """A rule about hosts refused an action (probing, accepting a host key)."""


def host_role_require(
    *,
    user: Any,
    host: Host,
    roles: Iterable[str],
    doing: str,
    missing: str = "No such host.",
) -> None:
    """`user` holds one of `roles` on `host`, or a refusal: not_found with `missing` when the
    host is outside the user's scope (exactly what a host that does not exist answers), and
    forbidden naming the role and the host when the user sees the host without the role
    ("`doing` needs the operator role on gpu-01.")."""
    wanted = tuple(roles)
    held = roles_on_host(user, host)
    if not held:
        raise HostRefused(missing, code="not_found")
    if held.isdisjoint(wanted):
        raise HostRefused(
            f"{doing} needs the {' or '.join(wanted)} role on {host.name}.",
            code="forbidden",
            host=host.name,
            roles=list(wanted),
        )


def user_may_probe(user: Any, host: Host | None = None) -> bool:
    """On `host`, or (no host) anywhere: the first gate and the navigation."""
    if host is None:
        return any(has_role(user, role) for role in PROBE_ROLES)
    return not roles_on_host(user, host).isdisjoint(PROBE_ROLES)


def require_probe_permission(user: Any, host: Host | None = None) -> None:
    if host is not None:
        host_role_require(user=user, host=host, roles=PROBE_ROLES, doing="Probing")
    elif not user_may_probe(user):
        raise HostRefused("Probing needs the operator or approver role.", code="forbidden")


def user_may_accept_host_keys(user: Any) -> bool:
    return bool(getattr(user, "is_superuser", False))
