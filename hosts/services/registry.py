"""Registering hosts and their credentials, and pinning their SSH keys."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from controlplane.audit import reasons
from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction

from ..choices import HostKeyStatus
from ..models import Credential, Host
from .permissions import HostRefused, user_may_accept_host_keys


@transaction.atomic
def credential_create(*, name: str, private_key: str, passphrase: str | None = None) -> Credential:
    credential = Credential(name=name)
    credential.set_private_key(private_key, passphrase)
    credential.full_clean()
    credential.save()
    return credential


@transaction.atomic
def host_create(
    *,
    name: str,
    address: str,
    port: int = 22,
    username: str = "root",
    use_sudo: bool = False,
    credential: Credential | None = None,
    labels: dict[str, str] | None = None,
    probe_interval_seconds: int = 60,
) -> Host:
    host = Host(
        name=name,
        address=address,
        port=port,
        username=username,
        use_sudo=use_sudo,
        credential=credential,
        labels=labels or {},
        probe_interval_seconds=probe_interval_seconds,
    )
    host.full_clean()
    host.save()
    return host


@transaction.atomic
def host_key_accept(
    *,
    host: Host,
    actor: Any,
    reason: str,
    reviewed_fingerprint: str | None = None,
    key: str | None = None,
) -> Host:
    """Pin a host's SSH key.

    A person (an administrator) pins the key the host presented, and only if it is still the
    one whose fingerprint they reviewed. A system actor (the command line, a simulated fleet's
    registration) may pin a `key` it fetched itself. The reason must be words.
    """
    import asyncssh

    if not isinstance(actor, str):
        if not user_may_accept_host_keys(actor):
            raise HostRefused("Accepting a host key needs an administrator.", code="forbidden")
        locked = Host.objects.select_for_update().get(pk=host.pk)
        presented = locked.presented_host_key
        if not presented or reviewed_fingerprint != locked.presented_key_fingerprint:
            raise HostRefused(
                "The presented key changed since the page was loaded; review it again.",
                code="conflict",
            )
        key = presented
    if not key:
        raise HostRefused("There is no key to accept.", code="invalid")
    try:
        reason = reasons.validate_reason(reason, what="accepting a host key")
    except ValidationError as exc:
        raise HostRefused(exc.messages[0]) from exc
    try:
        parsed = asyncssh.import_public_key(key.strip())
    except (asyncssh.KeyImportError, ValueError) as exc:
        raise HostRefused(f"Not an SSH public key: {exc}") from exc
    key_text = parsed.export_public_key("openssh").decode().strip()
    host = Host.objects.select_for_update().get(pk=host.pk)
    before = {"status": host.host_key_status, "fingerprint": host.host_key_fingerprint}
    host.host_key = key_text
    host.host_key_status = HostKeyStatus.PINNED
    host.presented_host_key = ""
    host.save(update_fields=["host_key", "host_key_status", "presented_host_key"])
    audit.record(
        actor=actor,
        action=AuditAction.HOST_KEY_ACCEPTED,
        target=host,
        data={
            "before": before,
            "after": {"status": host.host_key_status, "fingerprint": host.host_key_fingerprint},
            "reason": reason,
        },
    )
    return host
