"""Which hosts a user sees, and whether a role holds on a host: the host side of
controlplane.accounts.roles, for the pages, the API, selectors and services.

A host outside a user's scope is not listed, not found (404, never 403: a 403 would say it
exists) and not counted, and neither is anything of it (its snapshots, deployments, changes,
revisions). A host inside it, where the user lacks the role an action needs, is a 403 naming
the role (hosts.services.permissions.host_role_require says which).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from django.db.models import Model, QuerySet

from controlplane.accounts.models import HostGroup
from controlplane.accounts.roles import user_scope

from .models import Host

Row = TypeVar("Row", bound=Model)


def host_group_ids(host: Host) -> frozenset[int]:
    """The ids of the host groups `host` is in, read once per host object."""
    cached: frozenset[int] | None = getattr(host, "_group_ids", None)
    if cached is None:
        cached = frozenset(host.groups.values_list("pk", flat=True))
        host._group_ids = cached  # type: ignore[attr-defined]
    return cached


def hosts_group_ids_prefetch(hosts: Iterable[Host]) -> None:
    """Read the group ids of many hosts in one query, so that a page asking per row whether a
    role holds on its host (the fleet's "Probe now") costs no query per row."""
    missing = {host.pk: host for host in hosts if getattr(host, "_group_ids", None) is None}
    if not missing:
        return
    found: dict[int, set[int]] = {pk: set() for pk in missing}
    members = HostGroup.hosts.through.objects.filter(host_id__in=list(missing))
    for host_id, group_id in members.values_list("host_id", "hostgroup_id"):
        found[host_id].add(group_id)
    for pk, host in missing.items():
        host._group_ids = frozenset(found[pk])  # type: ignore[attr-defined]


def roles_on_host(user: Any, host: Host) -> frozenset[str]:
    scope = user_scope(user)
    if scope.sees_every_host and scope.everywhere >= scope.roles_anywhere():
        return scope.everywhere  # nothing a group could add
    return scope.roles_on(host_group_ids(host))


def user_has_role_on_host(user: Any, role: str, host: Host) -> bool:
    return role in roles_on_host(user, host)


def user_sees_host(user: Any, host: Host) -> bool:
    return bool(roles_on_host(user, host))


def hosts_visible(user: Any, hosts: QuerySet[Host] | None = None) -> QuerySet[Host]:
    """`hosts` (every host by default) narrowed to those `user` sees."""
    hosts = Host.objects.all() if hosts is None else hosts
    return hosts.filter(user_scope(user).host_q("pk"))


def rows_visible(user: Any, rows: QuerySet[Row], host_field: str = "host_id") -> QuerySet[Row]:
    """`rows` of hosts (snapshots, deployments, changes, revisions: `host_field` names their
    host's id) narrowed to those of hosts `user` sees, in the same query."""
    return rows.filter(user_scope(user).host_q(host_field))


def host_groups_shown(*, user: Any) -> list[str]:
    """The host groups the fleet's filter offers `user`: every group to whoever sees every
    host, otherwise the groups their roles are granted on (naming no other group)."""
    scope = user_scope(user)
    groups = HostGroup.objects.order_by("name")
    if not scope.sees_every_host:
        groups = groups.filter(pk__in=scope.group_ids())
    return list(groups.values_list("name", flat=True))


def host_groups_of(host: Host) -> list[str]:
    """The names of the groups `host` is in, for its page (and its group ids, read once)."""
    rows = list(host.groups.order_by("name").values_list("pk", "name"))
    host._group_ids = frozenset(pk for pk, _ in rows)  # type: ignore[attr-defined]
    return [name for _, name in rows]
