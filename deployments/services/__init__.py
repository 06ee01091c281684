"""Deciding on changes: request, approve, reject, break glass, cancel, and the rules around them.

Every function here enforces its rules itself; views, the API and tasks only parse input and
call them. Status changes go through deployments.lifecycle; execution lives in
deployments.runner.
"""

from .approvals import (
    approval_valid,
    approvals_void_on_drift,
    change_params_digest,
    change_request_approve,
    change_request_break_glass,
    change_request_reject,
)
from .preflight import Preflight, change_preflight, change_target_for, fit_check
from .refusals import ChangeRefused
from .requests import change_request_cancel, change_request_create

__all__ = [
    "ChangeRefused",
    "Preflight",
    "approval_valid",
    "approvals_void_on_drift",
    "change_params_digest",
    "change_preflight",
    "change_request_approve",
    "change_request_break_glass",
    "change_request_cancel",
    "change_request_create",
    "change_request_reject",
    "change_target_for",
    "fit_check",
]
