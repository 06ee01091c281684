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
