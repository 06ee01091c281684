"""Which hosts a user sees, and whether a role holds on a host: the host side of
controlplane.accounts.roles, for the pages, the API, selectors and services.

A host outside a user's scope is not listed, not found (404, never 403: a 403 would say it
exists) and not counted. A host inside it, where the user lacks the role an action needs, is a
403 naming the role.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from controlplane.accounts.roles import user_scope

from .models import Host


def host_group_ids(host: Host) -> frozenset[int]:
    """The ids of the host groups `host` is in, read once per host object."""
    cached: frozenset[int] | None = getattr(host, "_group_ids", None)
    if cached is None:
        cached = frozenset(host.groups.values_list("pk", flat=True))
        host._group_ids = cached  # type: ignore[attr-defined]
    return cached


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
