"""Hosts, their SSH credentials and the immutable state snapshots probes take of them."""

from __future__ import annotations

import datetime as dt
from typing import Any, NoReturn

import asyncssh
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from controlplane import crypto

from . import validators
from .choices import HostKeyStatus, ProbeTrigger, SnapshotStatus
from .state import HostState, material_fingerprint


class Credential(models.Model):
    """An SSH private key, stored encrypted. It is never rendered back or logged."""

    name = models.CharField(max_length=100, unique=True)
    private_key_encrypted = models.TextField(editable=False)
    public_key = models.TextField(editable=False, blank=True)
    fingerprint = models.CharField(max_length=100, editable=False, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.fingerprint})" if self.fingerprint else self.name

    def set_private_key(self, pem: str, passphrase: str | None = None) -> None:
        """Validate and store a private key; a passphrase-protected key is stored unlocked."""
        try:
            key = asyncssh.import_private_key(pem, passphrase)
        except (asyncssh.KeyImportError, ValueError) as exc:
            raise ValidationError(f"Not a usable SSH private key: {exc}") from exc
        unlocked = key.export_private_key("openssh").decode()
        self.private_key_encrypted = crypto.encrypt(unlocked)
        self.public_key = key.export_public_key("openssh").decode().strip()
        self.fingerprint = key.get_fingerprint("sha256")

    def private_key(self) -> str:
        return crypto.decrypt(self.private_key_encrypted)


class Host(models.Model):
    """A GPU machine reached over SSH."""

    name = models.CharField(max_length=63, unique=True, validators=[validators.validate_host_name])
    address = models.CharField(max_length=253, validators=[validators.validate_address])
    port = models.PositiveIntegerField(
        default=22, validators=[MinValueValidator(1), MaxValueValidator(65535)]
    )
    username = models.CharField(
        max_length=32, default="root", validators=[validators.validate_ssh_user]
    )
    use_sudo = models.BooleanField(
        default=False, help_text="Prefix state-changing commands with `sudo -n`."
    )
    credential = models.ForeignKey(
        Credential, on_delete=models.PROTECT, null=True, blank=True, related_name="hosts"
    )
    host_key = models.TextField(blank=True, help_text="The pinned SSH host key (OpenSSH format).")
    host_key_status = models.CharField(
        max_length=10, choices=HostKeyStatus.choices, default=HostKeyStatus.UNKNOWN
    )
    presented_host_key = models.TextField(
        blank=True, help_text="A key the host presented that is not (yet) trusted."
    )
    labels = models.JSONField(default=dict, blank=True, validators=[validators.validate_labels])
    probe_interval_seconds = models.PositiveIntegerField(
        default=60, validators=[MinValueValidator(10), MaxValueValidator(86400)]
    )
    integrity_interval_seconds = models.PositiveIntegerField(
        default=3600, validators=[MinValueValidator(60), MaxValueValidator(7 * 86400)]
    )
    enabled = models.BooleanField(default=True)
    last_probe_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_integrity_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        indexes = [
            # the beat sweep: enabled hosts ordered by when they were last probed
            models.Index(fields=["enabled", "last_probe_at"], name="host_probe_due"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def host_key_fingerprint(self) -> str:
        return _key_fingerprint(self.host_key)

    @property
    def presented_key_fingerprint(self) -> str:
        return _key_fingerprint(self.presented_host_key)

    def probe_due(self, now: dt.datetime | None = None) -> bool:
        now = now or timezone.now()
        if self.last_probe_at is None:
            return True
        return (now - self.last_probe_at).total_seconds() >= self.probe_interval_seconds

    def integrity_due(self, now: dt.datetime | None = None) -> bool:
        now = now or timezone.now()
        if self.last_integrity_at is None:
            return True
        return (now - self.last_integrity_at).total_seconds() >= self.integrity_interval_seconds


def _key_fingerprint(key_text: str) -> str:
    if not key_text:
        return ""
    try:
        return str(asyncssh.import_public_key(key_text).get_fingerprint("sha256"))
    except (asyncssh.KeyImportError, ValueError):
        return "invalid key"


class SnapshotImmutable(Exception):
    """Raised on any attempt to change a stored snapshot."""


class StateSnapshotQuerySet(models.QuerySet["StateSnapshot"]):
    def update(self, **kwargs: Any) -> NoReturn:
        raise SnapshotImmutable("state snapshots cannot be changed")


class StateSnapshot(models.Model):
    """What one probe saw on one host, at one moment by the control plane's clock. Immutable.

    `digest` is SHA-256 over the canonical JSON of `parsed`, so two snapshots with the same
    digest saw the same state, and an approval can bind to exactly what its approver saw.
    """

    host = models.ForeignKey(Host, on_delete=models.PROTECT, related_name="snapshots")
    taken_at = models.DateTimeField(db_index=True)
    status = models.CharField(max_length=20, choices=SnapshotStatus.choices)
    trigger = models.CharField(max_length=10, choices=ProbeTrigger.choices)
    duration_ms = models.PositiveIntegerField()
    raw = models.JSONField(default=dict, help_text="Each probe section's output and exit status.")
    parsed = models.JSONField(default=dict)
    digest = models.CharField(max_length=64)
    error = models.TextField(blank=True)
    includes_integrity = models.BooleanField(default=False)
    correlation_id = models.CharField(max_length=64, blank=True)

    objects = StateSnapshotQuerySet.as_manager()

    class Meta:
        ordering = ["-taken_at", "-id"]
        indexes = [
            # latest snapshot of a host, and a host's history page
            models.Index(fields=["host", "-taken_at"], name="snapshot_host_latest"),
        ]

    def __str__(self) -> str:
        return f"{self.host} @ {self.taken_at:%Y-%m-%d %H:%M:%S} ({self.status})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise SnapshotImmutable("state snapshots cannot be changed")
        super().save(*args, **kwargs)

    def age_seconds(self, now: dt.datetime | None = None) -> float:
        return max(0.0, ((now or timezone.now()) - self.taken_at).total_seconds())

    def state(self) -> HostState:
        """The parsed state as the parsers produced it: the one way to read a snapshot."""
        return HostState.from_json(self.parsed)

    def material_fingerprint(self) -> dict[str, Any]:
        return material_fingerprint(self.state())
