from django.db import models


class SnapshotStatus(models.TextChoices):
    OK = "ok", "ok"
    PARTIAL = "partial", "partial"
    UNREACHABLE = "unreachable", "unreachable"
    AUTH_FAILED = "auth_failed", "auth failed"
    HOST_KEY_UNKNOWN = "host_key_unknown", "host key not yet accepted"
    HOST_KEY_MISMATCH = "host_key_mismatch", "host key mismatch"
    ERROR = "error", "error"


# A probe that reached the host and ran its script: what its snapshot read is evidence.
READ_STATUSES = (SnapshotStatus.OK, SnapshotStatus.PARTIAL)


class HostKeyStatus(models.TextChoices):
    UNKNOWN = "unknown", "not yet accepted"
    PINNED = "pinned", "pinned"
    CHANGED = "changed", "changed: blocked"


class ProbeTrigger(models.TextChoices):
    SCHEDULE = "schedule", "schedule"
    MANUAL = "manual", "probe now"
    CLI = "cli", "command line"
    JOB = "job", "change job"
    DIAGNOSTIC = "diagnostic", "GPU diagnostic"
    # A demo's made-up past: GPU readings the simulator computed for the day before the demo
    # started (deployments.simfleet_registration.seed_gpu_history), so its charts have a day.
    HISTORY = "history", "demo history (seeded)"


class Verdict(models.TextChoices):
    """A host's health, worst last (deployments.health decides it). `changing`: a change job of
    the control plane's own is running on the host, and everything that is off is what that
    change does (the unit restarting, the model loading, the new unit file in place)."""

    HEALTHY = "healthy", "healthy"
    CHANGING = "changing", "changing"
    DEGRADED = "degraded", "degraded"
    UNKNOWN = "unknown", "unknown"
    FAILED = "failed", "failed"


VERDICT_SEVERITY: dict[str, int] = {
    Verdict.HEALTHY: 0,
    Verdict.CHANGING: 1,
    Verdict.DEGRADED: 2,
    Verdict.UNKNOWN: 3,
    Verdict.FAILED: 4,
}
