"""Putting hosts into host groups and taking them out. Each host that joins or leaves is
audited (controlplane.audit.tracking hears the membership change, in this transaction)."""

from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import ValidationError
from django.db import transaction

from controlplane.accounts.models import HostGroup

from ..models import Host
from .permissions import HostRefused


@transaction.atomic
def host_group_join(
    *, hosts: Iterable[Host], name: str, create: bool = True, description: str = ""
) -> HostGroup:
    """Put `hosts` into the group named `name`, made first when it does not exist (unless
    `create` is False: then an unknown group is refused). Hosts already in it stay once."""
    group = HostGroup.objects.filter(name=name).first()
    if group is None:
        if not create:
            raise HostRefused(f"There is no host group named {name!r}.", code="not_found")
        group = HostGroup(name=name, description=description)
        try:
            group.full_clean()
        except ValidationError as exc:
            raise HostRefused(" ".join(exc.messages), code="invalid") from exc
        group.save()
    group.hosts.add(*hosts)
    return group


@transaction.atomic
def host_group_leave(*, hosts: Iterable[Host], name: str) -> HostGroup:
    """Take `hosts` out of the group named `name`; the group stays, with its grants."""
    group = HostGroup.objects.filter(name=name).first()
    if group is None:
        raise HostRefused(f"There is no host group named {name!r}.", code="not_found")
    group.hosts.remove(*hosts)
    return group
