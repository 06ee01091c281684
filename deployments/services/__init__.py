"""Deciding on changes: request, approve, reject, break glass, cancel, and the rules around them.

Every function here enforces its rules itself; views, the API and tasks only parse input and
call them. Status changes go through deployments.lifecycle; execution lives in
deployments.execution.runner.
"""

from .approvals import (
    Decisions,
    approvals_void_on_drift,
    change_params_digest,
    change_request_approve,
    change_request_approve_allowed,
    change_request_approve_for_rollout,
    change_request_break_glass,
    change_request_break_glass_allowed,
    change_request_decisions,
    change_request_reject,
    change_request_reject_allowed,
)
from .diagnostics import gpu_diagnostic_allowed
from .integrity import IntegrityFinding, latest_integrity
from .preflight import (
    ChangeCheck,
    Preflight,
    change_check,
    change_preflight,
    change_review,
    change_target_for,
    fit_check,
)
from .refusals import ChangeRefused
from .requests import (
    change_request_cancel,
    change_request_cancel_allowed,
    change_request_create,
    change_request_create_allowed,
)
from .verdicts import host_health_update, hosts_health_update

__all__ = [
    "ChangeCheck",
    "ChangeRefused",
    "Decisions",
    "IntegrityFinding",
    "Preflight",
    "approvals_void_on_drift",
    "change_check",
    "change_params_digest",
    "change_preflight",
    "change_request_approve",
    "change_request_approve_allowed",
    "change_request_approve_for_rollout",
    "change_request_break_glass",
    "change_request_break_glass_allowed",
    "change_request_cancel",
    "change_request_cancel_allowed",
    "change_request_create",
    "change_request_create_allowed",
    "change_request_decisions",
    "change_request_reject",
    "change_request_reject_allowed",
    "change_review",
    "change_target_for",
    "fit_check",
    "gpu_diagnostic_allowed",
    "host_health_update",
    "hosts_health_update",
    "latest_integrity",
]
