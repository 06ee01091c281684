"""Queueing a "Probe now" for a worker: the page and the API answer before the probe has run."""

from __future__ import annotations

from typing import Any

from kombu.exceptions import OperationalError

from controlplane.audit import context as audit_context
from controlplane.refusals import Refused

from .. import dispatch
from ..models import Host
from .permissions import require_probe_permission


class QueueUnavailable(Refused):
    """The task broker did not take the job."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="queue_unavailable")


def probe_enqueue(*, host: Host, user: Any, integrity: bool = False) -> None:
    """Queue a "Probe now"; the snapshot arrives when a worker has run it."""
    require_probe_permission(user, host)
    try:
        dispatch.send(
            dispatch.PROBE_HOST,
            kwargs={
                "host_id": host.pk,
                "trigger": "manual",
                "integrity": integrity or None,
                "user_id": getattr(user, "pk", None),
                "correlation_id": audit_context.current().correlation_id,
            },
            retry=True,
            retry_policy={"max_retries": 2, "interval_start": 0, "interval_step": 0.5},
        )
    except OperationalError as exc:
        raise QueueUnavailable(
            "The task queue is not reachable, so the probe was not queued. Is the broker up?"
        ) from exc
