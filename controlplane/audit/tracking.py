"""Audit creating, changing and deleting the rows people manage, wherever it happens.

Signals catch the UI, the admin, the API and management commands alike. The actor comes from
the audit context (the request's user, or the system actor a command or task set).
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.db import models
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_save

from controlplane.audit.actions import AuditAction

from . import services

# model label -> fields whose changes are operational noise or recorded by a domain event
TRACKED: dict[str, set[str]] = {
    "hosts.host": {
        "last_probe_at",
        "probe_claimed_at",
        "host_key",
        "host_key_status",
        "presented_host_key",
        # hosts.services.maintenance records these with events of their own
        "maintenance_reason",
        "maintenance_since",
        "maintenance_until",
        "maintenance_by",
    },
    "hosts.credential": set(),
    "deployments.modelartifact": set(),
    "deployments.deployment": {"current_revision"},
    "deployments.benchmarkprofile": set(),
    "deployments.coherencecheck": set(),
    "deployments.drainhook": {"updated_at"},
    "auth.user": {"last_login"},
    "auth.group": set(),
    "accounts.hostgroup": set(),  # its hosts: _group_hosts_changed, one event per host
    # what a group at the identity provider grants
    "accounts.grouprolemapping": set(),
}


def _values(instance: models.Model, ignore: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in instance._meta.concrete_fields:
        if field.name in ignore:
            continue
        out[field.name] = field.value_from_object(instance)
    return services._jsonable(out)


def _before(sender: type[models.Model], instance: models.Model, **kwargs: Any) -> None:
    ignore = TRACKED[sender._meta.label_lower]
    if instance.pk is None or kwargs.get("raw"):
        instance._audit_before = None  # type: ignore[attr-defined]
        return
    old = sender._default_manager.filter(pk=instance.pk).first()
    instance._audit_before = _values(old, ignore) if old else None  # type: ignore[attr-defined]


def _after(
    sender: type[models.Model], instance: models.Model, created: bool, **kwargs: Any
) -> None:
    if kwargs.get("raw"):
        return
    label = sender._meta.label_lower
    after = _values(instance, TRACKED[label])
    before = getattr(instance, "_audit_before", None)
    kind = label.split(".")[1]
    if created or before is None:
        services.record(
            action=AuditAction.tracked(kind, "created"), target=instance, data={"after": after}
        )
        return
    changed = sorted(k for k in after if before.get(k) != after[k])
    if not changed:
        return
    services.record(
        action=AuditAction.tracked(kind, "changed"),
        target=instance,
        data={
            "fields": changed,
            "before": {k: before.get(k) for k in changed},
            "after": {k: after[k] for k in changed},
        },
    )


def _deleted(sender: type[models.Model], instance: models.Model, **kwargs: Any) -> None:
    label = sender._meta.label_lower
    kind = label.split(".")[1]
    services.record(
        action=AuditAction.tracked(kind, "deleted"),
        target=instance,
        data={"before": _values(instance, TRACKED[label])},
    )


def _groups_changed(sender: Any, instance: Any, action: str, pk_set: Any, **kwargs: Any) -> None:
    if action not in {"post_add", "post_remove", "post_clear"}:
        return
    from django.contrib.auth.models import Group, User

    if not isinstance(instance, User):
        return
    names = sorted(Group.objects.filter(pk__in=pk_set or []).values_list("name", flat=True))
    services.record(
        action=AuditAction.USER_ROLES_CHANGED,
        target=instance,
        data={"change": action.removeprefix("post_"), "groups": names},
    )


def _grant_view(grant: Any) -> dict[str, Any]:
    return {"role": grant.role, "host_group": grant.host_group.name}


def _grant_before(sender: Any, instance: Any, **kwargs: Any) -> None:
    old = sender._default_manager.select_related("host_group").filter(pk=instance.pk).first()
    instance._audit_before = _grant_view(old) if old is not None else None


def _grant_saved(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    """A role granted on a host group is a role change of its user, recorded as one."""
    if kwargs.get("raw"):
        return
    before, after = getattr(instance, "_audit_before", None), _grant_view(instance)
    if before == after:
        return
    data: dict[str, Any] = {"change": "add", "grant": after}
    if before is not None and not created:
        data = {"change": "changed", "before": before, "after": after}
    services.record(action=AuditAction.USER_ROLES_CHANGED, target=instance.user, data=data)


def _grant_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    services.record(
        action=AuditAction.USER_ROLES_CHANGED,
        target=instance.user,
        data={"change": "remove", "grant": _grant_view(instance)},
    )


def _group_hosts_changed(
    sender: Any, instance: Any, action: str, reverse: bool, pk_set: Any, **kwargs: Any
) -> None:
    """A host joining or leaving a host group, from either side (group.hosts, host.groups):
    one event per host, naming it, so that the host's timeline says when its scope changed and
    a person who does not see the host does not see the event either."""
    if action == "pre_clear":
        # The members are gone once post_clear is heard: remember them now.
        through = sender.objects.filter(**{"host_id" if reverse else "hostgroup_id": instance.pk})
        instance._audit_cleared = set(
            through.values_list("hostgroup_id" if reverse else "host_id", flat=True)
        )
        return
    if action not in {"post_add", "post_remove", "post_clear"}:
        return
    others = set(pk_set or ()) if action != "post_clear" else instance._audit_cleared
    change = "add" if action == "post_add" else "remove"
    group_model, host_model = apps.get_model("accounts.hostgroup"), apps.get_model("hosts.host")
    if reverse:  # host.groups.add(...): the instance is the host
        pairs = [(group, instance) for group in group_model.objects.filter(pk__in=others)]
    else:
        pairs = [(instance, host) for host in host_model.objects.filter(pk__in=others)]
    for group, host in sorted(pairs, key=lambda pair: (pair[0].name, pair[1].name)):
        services.record(
            action=AuditAction.HOST_GROUP_HOSTS_CHANGED,
            target=group,
            host=host,
            data={"change": change, "group": group.name, "host": host.name},
        )


def connect() -> None:
    for label in TRACKED:
        model = apps.get_model(label)
        uid = f"audit-{label}"
        pre_save.connect(_before, sender=model, dispatch_uid=f"{uid}-pre")
        post_save.connect(_after, sender=model, dispatch_uid=f"{uid}-post")
        post_delete.connect(_deleted, sender=model, dispatch_uid=f"{uid}-del")
    user_model = apps.get_model("auth.user")
    m2m_changed.connect(
        _groups_changed, sender=user_model.groups.through, dispatch_uid="audit-user-groups"
    )
    grant = apps.get_model("accounts.rolegrant")
    pre_save.connect(_grant_before, sender=grant, dispatch_uid="audit-rolegrant-pre")
    post_save.connect(_grant_saved, sender=grant, dispatch_uid="audit-rolegrant-post")
    post_delete.connect(_grant_deleted, sender=grant, dispatch_uid="audit-rolegrant-del")
    host_group = apps.get_model("accounts.hostgroup")
    m2m_changed.connect(
        _group_hosts_changed, sender=host_group.hosts.through, dispatch_uid="audit-group-hosts"
    )
