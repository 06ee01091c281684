"""What a request says about draining first: the drain hook it chose from the administrator's
list and how long its job may wait for requests in flight, checked and kept with the request
(its parameters, which approvals bind to)."""

from __future__ import annotations

from typing import Any

from ..drain_hooks import DEADLINE_DEFAULT_SECONDS, DEADLINE_MAX_SECONDS, DEADLINE_MIN_SECONDS
from ..models import DrainHook
from .refusals import ChangeRefused


def drain_params(hook: DrainHook | None, deadline_seconds: int | None) -> dict[str, Any] | None:
    """The request's `drain` parameters, or None when it does not drain. The hook is named by
    its row and bound by its digest: an administrator who edits or disables it after the
    request makes the job refuse it, rather than run something nobody chose."""
    if hook is None:
        if deadline_seconds is not None:
            message = "A drain deadline needs a drain hook to drain with."
            raise ChangeRefused(message, fields={"drain_deadline_seconds": message})
        return None
    if not hook.enabled:
        message = f"The drain hook {hook.name} is disabled: choose an enabled one."
        raise ChangeRefused(message, fields={"drain_hook": message})
    deadline = DEADLINE_DEFAULT_SECONDS if deadline_seconds is None else deadline_seconds
    if (
        isinstance(deadline, bool)
        or not isinstance(deadline, int)
        or not DEADLINE_MIN_SECONDS <= deadline <= DEADLINE_MAX_SECONDS
    ):
        message = f"The drain deadline is {DEADLINE_MIN_SECONDS} to {DEADLINE_MAX_SECONDS} seconds."
        raise ChangeRefused(message, fields={"drain_deadline_seconds": message})
    return {
        "hook": hook.pk,
        "hook_name": hook.name,
        "hook_digest": hook.digest(),
        "deadline_seconds": deadline,
    }
