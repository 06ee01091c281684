"""Roles are Django groups. Admins are superusers and hold every role.

- viewer: reads everything.
- operator: probes hosts and requests changes.
- approver: approves other people's change requests.
Operators and approvers can also read, so every signed-in user with any role is a viewer.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group

VIEWER = "viewer"
OPERATOR = "operator"
APPROVER = "approver"
ROLES = (VIEWER, OPERATOR, APPROVER)


def user_roles(user: Any) -> set[str]:
    if not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", False):
        return set()
    if user.is_superuser:
        return set(ROLES)
    cached = getattr(user, "_controlplane_roles", None)
    if cached is None:
        cached = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
        if cached:
            cached.add(VIEWER)
        user._controlplane_roles = cached
    return set(cached)


def has_role(user: Any, role: str) -> bool:
    return role in user_roles(user)


def ensure_role_groups() -> dict[str, Group]:
    return {name: Group.objects.get_or_create(name=name)[0] for name in ROLES}
