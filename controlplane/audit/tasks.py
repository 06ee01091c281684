"""Beat's two audit jobs: anchor the chain head outside the database, and verify the log.

Both are safe to run twice: a checkpoint of an unchanged head is not written again, and a
verification only adds one more result row.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from . import services


@shared_task(name="controlplane.audit.tasks.write_checkpoint")
def write_checkpoint() -> dict[str, Any] | None:
    written = services.checkpoint_write()
    return written.body() if written else None


@shared_task(name="controlplane.audit.tasks.verify_chain")
def verify_chain() -> dict[str, Any]:
    # One process: forking inside a worker (threads, open broker sockets) is not worth the
    # seconds it would save on a job that runs every few minutes in the background.
    return services.verification_run(trigger="beat", workers=1).as_dict()
