"""Every action the audit log records, in one place.

Webhooks, the review UI's filters and exports match on these names, so code writes members of
this class, never string literals (a test holds the product to that): renaming an action is a
change here that every user of it follows, not a silent break.
"""

from __future__ import annotations

from django.db import models


class AuditAction(models.TextChoices):
    # sign-in and roles
    AUTH_LOGIN = "auth.login", "signed in"
    AUTH_LOGOUT = "auth.logout", "signed out"
    AUTH_LOGIN_FAILED = "auth.login_failed", "sign-in failed"
    USER_ROLES_CHANGED = "user.roles_changed", "roles changed"
    # the identity provider (controlplane.accounts.oidc)
    AUTH_SIGN_IN_ENDED = "auth.sign_in_ended", "sign-in ended by the identity provider"
    IDENTITY_LINKED = "identity.linked", "identity provider account linked"
    IDENTITY_GROUPS_CHANGED = "identity.groups_changed", "groups changed at the identity provider"
    IDENTITY_GROUPS_IGNORED = "identity.groups_ignored", "groups from the identity provider ignored"
    # rows people manage (controlplane.audit.tracking)
    USER_CREATED = "user.created", "user created"
    USER_CHANGED = "user.changed", "user changed"
    USER_DELETED = "user.deleted", "user deleted"
    GROUP_CREATED = "group.created", "group created"
    GROUP_CHANGED = "group.changed", "group changed"
    GROUP_DELETED = "group.deleted", "group deleted"
    GROUP_ROLE_MAPPING_CREATED = "grouprolemapping.created", "group role mapping created"
    GROUP_ROLE_MAPPING_CHANGED = "grouprolemapping.changed", "group role mapping changed"
    GROUP_ROLE_MAPPING_DELETED = "grouprolemapping.deleted", "group role mapping deleted"
    HOST_CREATED = "host.created", "host created"
    HOST_CHANGED = "host.changed", "host changed"
    HOST_DELETED = "host.deleted", "host deleted"
    CREDENTIAL_CREATED = "credential.created", "credential created"
    CREDENTIAL_CHANGED = "credential.changed", "credential changed"
    CREDENTIAL_DELETED = "credential.deleted", "credential deleted"
    MODEL_CREATED = "modelartifact.created", "model created"
    MODEL_CHANGED = "modelartifact.changed", "model changed"
    MODEL_DELETED = "modelartifact.deleted", "model deleted"
    DEPLOYMENT_CREATED = "deployment.created", "deployment created"
    DEPLOYMENT_CHANGED = "deployment.changed", "deployment changed"
    DEPLOYMENT_DELETED = "deployment.deleted", "deployment deleted"
    BENCHMARK_PROFILE_CREATED = "benchmarkprofile.created", "benchmark profile created"
    BENCHMARK_PROFILE_CHANGED = "benchmarkprofile.changed", "benchmark profile changed"
    BENCHMARK_PROFILE_DELETED = "benchmarkprofile.deleted", "benchmark profile deleted"
    COHERENCE_CHECK_CREATED = "coherencecheck.created", "coherence check created"
    COHERENCE_CHECK_CHANGED = "coherencecheck.changed", "coherence check changed"
    COHERENCE_CHECK_DELETED = "coherencecheck.deleted", "coherence check deleted"
    DRAIN_HOOK_CREATED = "drainhook.created", "drain hook created"
    DRAIN_HOOK_CHANGED = "drainhook.changed", "drain hook changed"
    DRAIN_HOOK_DELETED = "drainhook.deleted", "drain hook deleted"
    # host groups and where roles hold (RoleGrant changes are recorded as user.roles_changed)
    HOST_GROUP_CREATED = "hostgroup.created", "host group created"
    HOST_GROUP_CHANGED = "hostgroup.changed", "host group changed"
    HOST_GROUP_DELETED = "hostgroup.deleted", "host group deleted"
    HOST_GROUP_HOSTS_CHANGED = "hostgroup.hosts_changed", "host joined or left a group"
    # hosts
    PROBE_COMPLETED = "probe.completed", "probe completed"
    HOST_KEY_PRESENTED = "host.key_presented", "host key presented"
    HOST_KEY_CHANGED = "host.key_changed", "host key changed"
    HOST_KEY_ACCEPTED = "host.key_accepted", "host key accepted"
    HOST_JOURNAL_READ = "host.journal_read", "journal read"
    HOST_GPU_DIAGNOSTIC_REQUESTED = "host.gpu_diagnostic_requested", "GPU diagnostic requested"
    HOST_VERDICT_CHANGED = "host.verdict_changed", "health verdict changed"
    HOST_MAINTENANCE_ENTERED = "host.maintenance_entered", "maintenance entered"
    HOST_MAINTENANCE_CHANGED = "host.maintenance_changed", "maintenance changed"
    HOST_MAINTENANCE_LEFT = "host.maintenance_left", "maintenance left early"
    HOST_MAINTENANCE_ENDED = "host.maintenance_ended", "maintenance ended"
    # change requests
    CHANGE_REQUESTED = "change.requested", "change requested"
    CHANGE_BUSY_ACKNOWLEDGED = "change.busy_acknowledged", "busy server acknowledged"
    CHANGE_UNKNOWN_ACKNOWLEDGED = "change.unknown_acknowledged", "unknown facts acknowledged"
    CHANGE_INTEGRITY_ACKNOWLEDGED = (
        "change.integrity_acknowledged",
        "unclean engine integrity acknowledged",
    )
    CHANGE_APPROVED = "change.approved", "change approved"
    CHANGE_BREAK_GLASS = "change.break_glass", "break-glass"
    CHANGE_REJECTED = "change.rejected", "change rejected"
    CHANGE_CANCELLED = "change.cancelled", "change cancelled"
    CHANGE_CANCEL_REQUESTED = "change.cancel_requested", "cancel requested"
    CHANGE_STARTED = "change.started", "job started"
    CHANGE_STEP = "change.step", "job step"
    CHANGE_ROLLBACK_STARTED = "change.rollback_started", "rollback started"
    CHANGE_DRAINED = "change.drained", "host drained"
    CHANGE_UNDRAINED = "change.undrained", "host put back in rotation"
    CHANGE_SUCCEEDED = "change.succeeded", "job succeeded"
    CHANGE_FAILED = "change.failed", "job failed"
    CHANGE_ROLLED_BACK = "change.rolled_back", "job rolled back"
    CHANGE_DRIFTED = "change.drifted", "drifted"
    CHANGE_INTERRUPTED = "change.interrupted", "job interrupted"
    # rollouts (deployments.rollouts): one change across many hosts, in waves
    ROLLOUT_REQUESTED = "rollout.requested", "rollout requested"
    ROLLOUT_APPROVED = "rollout.approved", "rollout approved"
    ROLLOUT_REJECTED = "rollout.rejected", "rollout rejected"
    ROLLOUT_STARTED = "rollout.started", "rollout started"
    ROLLOUT_WAVE_STARTED = "rollout.wave_started", "rollout wave started"
    ROLLOUT_WAVE_PASSED = "rollout.wave_passed", "rollout wave passed"
    ROLLOUT_HOST_SKIPPED = "rollout.host_skipped", "rollout host skipped"
    ROLLOUT_HOST_CHECKED = "rollout.host_checked", "rollout host checked"
    ROLLOUT_PAUSED = "rollout.paused", "rollout paused"
    ROLLOUT_RESUMED = "rollout.resumed", "rollout resumed"
    ROLLOUT_HALTED = "rollout.halted", "rollout halted"
    ROLLOUT_ROLLED_BACK = "rollout.rolled_back", "rollout wave rolled back"
    ROLLOUT_SUCCEEDED = "rollout.succeeded", "rollout succeeded"
    ROLLOUT_ABORTED = "rollout.aborted", "rollout aborted"
    ROLLOUT_FAILED = "rollout.failed", "rollout failed"
    # API tokens and webhooks
    API_TOKEN_CREATED = "api_token.created", "API token created"
    API_TOKEN_REVOKED = "api_token.revoked", "API token revoked"
    WEBHOOK_CREATED = "webhook.created", "webhook created"
    WEBHOOK_CHANGED = "webhook.changed", "webhook changed"
    WEBHOOK_DELETED = "webhook.deleted", "webhook deleted"
    WEBHOOK_TEST_SENT = "webhook.test_sent", "webhook test sent"
    # the audit trail's own stream to a SIEM (controlplane.audit.streaming)
    AUDIT_STREAM_ADDED = "audit_stream.added", "audit stream added"
    AUDIT_STREAM_REMOVED = "audit_stream.removed", "audit stream removed"
    AUDIT_STREAM_REPLAYED = "audit_stream.replayed", "audit stream replayed"

    @classmethod
    def change_ended(cls, status: str) -> AuditAction:
        """The action a change job's final status is recorded as."""
        return cls(f"change.{status}")

    @classmethod
    def tracked(cls, kind: str, verb: str) -> AuditAction:
        """`<model>.created|changed|deleted` for a tracked model."""
        return cls(f"{kind}.{verb}")
