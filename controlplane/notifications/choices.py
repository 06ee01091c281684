from django.db import models


class EventType(models.TextChoices):
    APPROVAL_NEEDED = "approval.needed", "approval needed"
    CHANGE_APPROVED = "change.approved", "change approved"
    CHANGE_REJECTED = "change.rejected", "change rejected"
    JOB_FINISHED = "job.finished", "job finished (with its outcome)"
    DRIFT_DETECTED = "drift.detected", "drift detected"
    HOST_UNREACHABLE = "host.unreachable", "host unreachable"
    HOST_KEY_CHANGED = "host.key_changed", "host key changed"
    HOST_DEGRADED = "host.degraded", "host degraded or failed (its verdict got worse)"
    HOST_RECOVERED = "host.recovered", "host recovered (healthy again)"
    ROLLOUT_APPROVAL_NEEDED = "rollout.approval_needed", "rollout needs approval"
    ROLLOUT_APPROVED = "rollout.approved", "rollout approved"
    ROLLOUT_REJECTED = "rollout.rejected", "rollout rejected"
    ROLLOUT_WAVE_STARTED = "rollout.wave_started", "rollout wave started"
    ROLLOUT_WAVE_PASSED = "rollout.wave_passed", "rollout wave passed its checks"
    ROLLOUT_HALTED = "rollout.halted", "rollout halted (which check failed where)"
    ROLLOUT_ROLLED_BACK = "rollout.rolled_back", "rollout's failed wave rolled back"
    ROLLOUT_SUCCEEDED = "rollout.succeeded", "rollout succeeded"
    ROLLOUT_ABORTED = "rollout.aborted", "rollout aborted"
    ROLLOUT_FAILED = "rollout.failed", "rollout failed (its approval no longer held)"


# Sent only by "Send a test" to one endpoint; nobody subscribes to it.
PING = "ping"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "pending"
    RETRYING = "retrying", "retrying"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"


OPEN_DELIVERY_STATUSES = (DeliveryStatus.PENDING, DeliveryStatus.RETRYING)
