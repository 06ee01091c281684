"""What the deployments app hands to its Celery tasks, sent by task name: services never import
deployments.tasks (which imports the runner, which imports the services), so the app has no
import cycle to hide in a function."""

from __future__ import annotations

import logging

from celery import current_app
from django.db import transaction
from kombu.exceptions import OperationalError

logger = logging.getLogger(__name__)

EXECUTE_CHANGE = "deployments.tasks.execute_change"
RECOVER_INTERRUPTED_JOBS = "deployments.tasks.recover_interrupted_jobs"
GPU_DIAGNOSTIC = "deployments.tasks.gpu_diagnostic"
ROLLOUT_ADVANCE = "deployments.tasks.rollout_advance"
ROLLOUTS_SWEEP = "deployments.tasks.rollouts_sweep"


def change_execute_on_commit(change_id: int) -> None:
    """Queue the change's job once the transaction that queued it commits."""

    def send() -> None:
        try:
            current_app.send_task(EXECUTE_CHANGE, args=(change_id,))
        except OperationalError:
            # The broker is down. The change is committed and stays queued: the recovery
            # sweep sends it again once the broker answers (runner.queued_too_long). Raising
            # here would answer the request that made the change with an error page.
            logger.warning("change #%s is queued, but the broker did not take it", change_id)

    transaction.on_commit(send)


def gpu_diagnostic_send(host_id: int, level: int) -> None:
    """Queue DCGM's diagnostic on the host once the transaction that asked for it commits."""
    transaction.on_commit(
        lambda: current_app.send_task(GPU_DIAGNOSTIC, kwargs={"host_id": host_id, "level": level})
    )


def rollout_advance_on_commit(rollout_id: int) -> None:
    """Have a worker look at the rollout again once the transaction that moved it commits
    (approved, resumed, one of its changes ended)."""

    def send() -> None:
        try:
            current_app.send_task(ROLLOUT_ADVANCE, args=(rollout_id,))
        except OperationalError:
            # Beat's rollout sweep looks at every active rollout anyway (ROLLOUT_SWEEP_SECONDS).
            logger.warning("rollout #%s moved, but the broker did not take its task", rollout_id)

    transaction.on_commit(send)
