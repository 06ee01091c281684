"""Writes about hosts: registering them, pinning keys, taking snapshots."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from controlplane.audit import services as audit

from .choices import HostKeyStatus
from .models import Credential, Host


def credential_create(*, name: str, private_key: str, passphrase: str | None = None) -> Credential:
    credential = Credential(name=name)
    credential.set_private_key(private_key, passphrase)
    credential.full_clean()
    credential.save()
    return credential


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
def host_key_accept(*, host: Host, key: str, actor: Any, reason: str = "") -> Host:
    """Pin `key` as the host's SSH key. Only the key the host actually presented may be accepted
    from the UI; the command line may pin a key it just fetched itself."""
    import asyncssh

    key = key.strip()
    parsed = asyncssh.import_public_key(key)  # raises on garbage
    key_text = parsed.export_public_key("openssh").decode().strip()
    host = Host.objects.select_for_update().get(pk=host.pk)
    before = {"status": host.host_key_status, "fingerprint": host.host_key_fingerprint}
    host.host_key = key_text
    host.host_key_status = HostKeyStatus.PINNED
    host.presented_host_key = ""
    host.save(update_fields=["host_key", "host_key_status", "presented_host_key"])
    audit.record(
        actor=actor,
        action="host.key_accepted",
        target=host,
        data={
            "before": before,
            "after": {"status": host.host_key_status, "fingerprint": host.host_key_fingerprint},
            "reason": reason,
        },
    )
    return host
