"""Who holds which role, and where: the one place roles are resolved.

- viewer: reads.
- operator: probes hosts and requests changes.
- approver: approves other people's change requests.
Administrators (superusers) hold every role everywhere. Any role also reads what it may act
on, so whoever holds a role on a host group is a viewer of its hosts.

A role is held everywhere or on a host group (controlplane.accounts.models says from where).
`user_scope` reads it once per request and caches it on the user object; nothing else queries
grants. Pages and API views ask `has_role` (the role anywhere) only as a first gate, so that a
request without the role is refused before its input is read; whether the role holds on the
host acted on is `has_role_on`, with the host's group ids (hosts.scope passes them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import Group
from django.db.models import IntegerField, Q, Subquery, Value

from .choices import Role
from .models import GroupRoleMapping, HostGroup, IdentityGroup, RoleGrant

VIEWER = Role.VIEWER.value
OPERATOR = Role.OPERATOR.value
APPROVER = Role.APPROVER.value
ROLES = (VIEWER, OPERATOR, APPROVER)

_CACHE = "_controlplane_scope"


@dataclass(frozen=True)
class Scope:
    """The roles a user holds: on every host, and per host group (by the group's id)."""

    everywhere: frozenset[str] = frozenset()
    groups: Mapping[int, frozenset[str]] = field(default_factory=dict)

    def roles_anywhere(self) -> frozenset[str]:
        held = set(self.everywhere)
        for roles in self.groups.values():
            held |= roles
        return frozenset(held)

    def roles_on(self, group_ids: Iterable[int]) -> frozenset[str]:
        """The roles held on a host in these groups."""
        held = set(self.everywhere)
        for group_id in group_ids:
            held |= self.groups.get(group_id, frozenset())
        return frozenset(held)

    @property
    def sees_every_host(self) -> bool:
        return bool(self.everywhere)

    def group_ids(self, role: str | None = None) -> frozenset[int]:
        """The host groups where `role` (any role, when None) is held by a grant on the group."""
        return frozenset(g for g, roles in self.groups.items() if role is None or role in roles)

    def host_q(self, field: str = "pk", role: str | None = None) -> Q:
        """A filter on `field` (a host's id) that keeps the hosts this scope sees, or where it
        holds `role`. Q() when that is every host; a filter that matches nothing when none."""
        if (role is None and self.everywhere) or (role is not None and role in self.everywhere):
            return Q()
        ids = self.group_ids(role)
        if not ids:
            return Q(pk__in=[])
        members = HostGroup.hosts.through.objects.filter(hostgroup_id__in=ids).values("host_id")
        return Q(**{f"{field}__in": Subquery(members)})

    def host_or_none_q(self, field: str = "host_id") -> Q:
        """host_q for rows that may name no host (audit events, webhook deliveries): those
        about a host this scope does not see are left out, those about no host stay."""
        seen = self.host_q(field)
        return seen if not seen else Q(**{f"{field}__isnull": True}) | seen


def _with_viewer(roles: set[str]) -> frozenset[str]:
    return frozenset(roles | {VIEWER}) if roles else frozenset()


def user_scope(user: Any) -> Scope:
    """Every role `user` holds, everywhere and per host group; empty for the anonymous and the
    inactive. Cached on the user object: a request (or a task) reads grants once."""
    if not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", False):
        return Scope()
    if user.is_superuser:
        return Scope(everywhere=frozenset(ROLES))
    cached = getattr(user, _CACHE, None)
    if cached is not None:
        return cached
    everywhere: set[str] = set()
    per_group: dict[int, set[str]] = {}
    for group_id, role in _grant_rows(user):
        if group_id is None:
            everywhere.add(role)
        else:
            per_group.setdefault(group_id, set()).add(role)
    scope = Scope(
        everywhere=_with_viewer(everywhere),
        groups={g: _with_viewer(roles) for g, roles in per_group.items()},
    )
    setattr(user, _CACHE, scope)
    return scope


def _grant_rows(user: Any) -> list[tuple[int | None, str]]:
    """(host group id or None for everywhere, role) from all three sources, in one query."""
    nowhere = Value(None, output_field=IntegerField())
    local = Group.objects.filter(user=user, name__in=ROLES).order_by().values_list(nowhere, "name")
    granted = RoleGrant.objects.filter(user=user).order_by().values_list("host_group_id", "role")
    carried = IdentityGroup.objects.filter(identity__user=user).order_by().values("name")
    mapped = (
        GroupRoleMapping.objects.filter(idp_group__in=Subquery(carried))
        .order_by()
        .values_list("host_group_id", "role")
    )
    return list(local.union(granted, mapped, all=True))


def scope_forget(user: Any) -> None:
    """Drop the cached scope, after grants or the identity provider's groups changed."""
    if hasattr(user, _CACHE):
        delattr(user, _CACHE)


def user_roles(user: Any) -> set[str]:
    """The roles `user` holds anywhere: what the navigation offers, and a view's first gate."""
    return set(user_scope(user).roles_anywhere())


def has_role(user: Any, role: str) -> bool:
    """`role` held anywhere. A first gate only: whether it holds on a host is has_role_on."""
    return role in user_scope(user).roles_anywhere()


def has_role_on(user: Any, role: str, group_ids: Iterable[int]) -> bool:
    """`role` held on a host in these groups (or everywhere)."""
    return role in user_scope(user).roles_on(group_ids)


def ensure_role_groups() -> dict[str, Group]:
    """The Django groups whose members hold a role everywhere."""
    return {name: Group.objects.get_or_create(name=name)[0] for name in ROLES}
