"""The audit log: append-only, hash-chained events."""

from __future__ import annotations

from typing import Any, NoReturn

from django.db import models

from .fields import CanonicalJSONField


class AuditLogIsAppendOnly(Exception):
    """Raised on any attempt to change or remove an audit event through the ORM."""


class AuditEventQuerySet(models.QuerySet["AuditEvent"]):
    def update(self, **kwargs: Any) -> NoReturn:
        raise AuditLogIsAppendOnly("audit events cannot be updated")

    def delete(self) -> NoReturn:
        raise AuditLogIsAppendOnly("audit events cannot be deleted")


class AuditEvent(models.Model):
    """One decision or step. Copies labels (actor, target, host) so it outlives what it names.

    `hash` is SHA-256 over the event's canonical JSON, which includes `prev_hash`, so editing,
    removing or reordering an event breaks the chain from that point on. Signed checkpoints
    outside the database (checkpoints.py) catch what the chain alone cannot: the newest events
    cut off, or the whole chain recomputed.
    """

    seq = models.BigIntegerField(primary_key=True)
    created_at = models.DateTimeField()
    actor = models.CharField(max_length=200)
    actor_user_id = models.BigIntegerField(null=True, blank=True)  # no FK: users may be deleted
    action = models.CharField(max_length=100)
    target_type = models.CharField(max_length=100, blank=True)
    target_id = models.CharField(max_length=100, blank=True)
    target_label = models.CharField(max_length=300, blank=True)
    host_id = models.BigIntegerField(null=True, blank=True)
    host_label = models.CharField(max_length=200, blank=True)
    snapshot_id = models.BigIntegerField(null=True, blank=True)
    snapshot_digest = models.CharField(max_length=64, blank=True)
    snapshot_age_seconds = models.FloatField(null=True, blank=True)
    correlation_id = models.CharField(max_length=64, blank=True)
    data = CanonicalJSONField(default=dict, blank=True)
    ip = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=300, blank=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-seq"]
        indexes = [
            # History filters combine one of these with keyset pagination on seq.
            models.Index(fields=["action", "-seq"], name="audit_action_seq"),
            models.Index(fields=["host_id", "-seq"], name="audit_host_seq"),
            # the history filtered by a host's name as the filter form takes it (`?host=gpu-01`):
            # events keep the name they recorded, so a deleted host's events are found too
            models.Index(fields=["host_label", "-seq"], name="audit_host_label_seq"),
            # "what happened to this host" narrowed to one action, e.g. its model swaps
            models.Index(fields=["host_id", "action", "-seq"], name="audit_host_action_seq"),
            models.Index(fields=["actor", "-seq"], name="audit_actor_seq"),
            models.Index(fields=["target_type", "target_id", "-seq"], name="audit_target_seq"),
            models.Index(fields=["correlation_id", "seq"], name="audit_correlation_seq"),
            # time filters find the seq window they cover (selectors.events_filtered)
            models.Index(fields=["created_at"], name="audit_created_at"),
            # snapshot retention keeps every snapshot an event names (hosts.services.retention)
            models.Index(
                fields=["snapshot_id"],
                name="audit_snapshot",
                condition=models.Q(snapshot_id__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.action} by {self.actor}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AuditLogIsAppendOnly("audit events cannot be updated")
        kwargs["force_insert"] = True
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise AuditLogIsAppendOnly("audit events cannot be deleted")


class AuditEventHost(models.Model):
    """A host an event concerns besides the one in its `host_id`: a rollout's events name every
    host of the rollout. Not part of the chain (an index of what the event already says, as
    `host_id` is), written in the event's transaction; the log's scope reads it, so an event
    naming a host outside a person's groups is left out wherever they look."""

    # The event's seq and the host's id, without foreign keys: like host_id on the event, so
    # that hosts may be deleted, and so that nothing refers into the append-only table (its
    # triggers, and tampering tests' TRUNCATE, meet no constraint of another table).
    seq = models.BigIntegerField()
    host_id = models.BigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["seq", "host_id"], name="audit_event_host_once"),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} names host {self.host_id}"


class AuditChainHead(models.Model):
    """The single row every append locks: it serialises writers so the chain never forks."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    seq = models.BigIntegerField(default=0)
    hash = models.CharField(max_length=64, default="0" * 64)

    def __str__(self) -> str:
        return f"head #{self.seq}"


class AuditVerification(models.Model):
    """The outcome of one walk over the chain and its checkpoints.

    Not an audit event: it is an observation about the log, and writing it into the chain
    would change the head that the next checkpoint signs every time beat runs.
    """

    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField()
    trigger = models.CharField(max_length=20)  # "beat", "cli", ...
    ok = models.BooleanField()
    events = models.BigIntegerField()
    head_seq = models.BigIntegerField()
    head_hash = models.CharField(max_length=64, blank=True)
    checkpoints = models.PositiveIntegerField()
    broken_seq = models.BigIntegerField(null=True, blank=True)
    problem = models.CharField(max_length=40, blank=True)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [
            # the history page shows the latest result
            models.Index(fields=["-started_at"], name="audit_verification_latest"),
        ]

    def __str__(self) -> str:
        state = "ok" if self.ok else f"broken at #{self.broken_seq}"
        return f"verification {self.started_at:%Y-%m-%d %H:%M:%S}: {state}"


class AuditStreamCursor(models.Model):
    """How far one destination of the audit stream (settings.AUDIT_STREAMS, by name) has got.

    Every event up to `delivered_seq` was taken by the receiver; the next one sent must be
    `delivered_seq + 1` and carry `delivered_hash` as its prev_hash, so the stream can neither
    skip nor fork. `sent_seq` is the highest seq ever handed to the receiver, written before
    the send: anything sent again up to it (after a crash, a timeout or a replay) goes out
    flagged as a redelivery. `lease_until`/`lease_token` are the claim of the one worker that
    sends it now; the token fences a worker whose lease ran out from moving the cursor.
    """

    name = models.CharField(max_length=63, unique=True)
    kind = models.CharField(max_length=10)
    delivered_seq = models.BigIntegerField(default=0)
    delivered_hash = models.CharField(max_length=64, default="0" * 64)
    sent_seq = models.BigIntegerField(default=0)
    redelivered = models.BigIntegerField(default=0)  # records sent flagged, all time
    attempts = models.PositiveIntegerField(default=0)  # failed attempts since the last success
    last_error = models.TextField(blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)  # backoff after a failure
    lease_until = models.DateTimeField(null=True, blank=True)
    lease_token = models.CharField(max_length=32, blank=True)
    created_at = models.DateTimeField()
    removed_at = models.DateTimeField(null=True, blank=True)  # gone from AUDIT_STREAMS

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"audit stream {self.name} at #{self.delivered_seq}"
