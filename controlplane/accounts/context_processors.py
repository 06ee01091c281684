from typing import Any

from django.http import HttpRequest

from .models import HostGroup
from .roles import VIEWER, user_roles, user_scope


def roles(request: HttpRequest) -> dict[str, Any]:
    held = user_roles(request.user)
    return {
        "user_roles": roles_shown(request.user),
        "is_operator": "operator" in held,
        "is_approver": "approver" in held,
    }


def roles_shown(user: Any) -> list[str]:
    """The roles the page header names: those held everywhere, then where the others hold
    ("operator on team-a"), so that nobody mistakes a role on one group for one everywhere.
    (Any role on a group reads it: "viewer on" is said only where it is the only one.)"""
    scope = user_scope(user)
    shown = sorted(scope.everywhere)
    where: dict[str, list[int]] = {}
    for group_id, group_roles in scope.groups.items():
        extra = group_roles - scope.everywhere
        for role in extra - {VIEWER} or extra:
            where.setdefault(role, []).append(group_id)
    if where:
        names = dict(HostGroup.objects.filter(pk__in=scope.groups).values_list("pk", "name"))
        for role, ids in sorted(where.items()):
            shown.append(f"{role} on {', '.join(sorted(names.get(i, '?') for i in ids))}")
    return shown
