"""Beat's audit jobs: anchor the chain head outside the database, verify the log, and keep the
stream to the SIEM moving.

All are safe to run twice: a checkpoint of an unchanged head is not written again, a
verification only adds one more result row, and a stream send claims its destination's cursor
first (a second one finds it busy) and starts from what was delivered.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from . import context as audit_context
from . import services
from .streaming import delivery, dispatch
from .streaming import services as streaming


@shared_task(name="controlplane.audit.tasks.write_checkpoint")
def write_checkpoint() -> dict[str, Any] | None:
    written = services.checkpoint_write()
    return written.body() if written else None


@shared_task(name="controlplane.audit.tasks.verify_chain")
def verify_chain() -> dict[str, Any]:
    # One process: forking inside a worker (threads, open broker sockets) is not worth the
    # seconds it would save on a job that runs every few minutes in the background.
    return services.verification_run(trigger="beat", workers=1).as_dict()


@shared_task(name=dispatch.STREAM, acks_late=True)
def stream_destination(name: str) -> dict[str, Any]:
    with audit_context.acting(services.SYSTEM_WORKER):
        return delivery.stream_deliver_named(name=name).as_dict()


@shared_task(name=dispatch.SWEEP)
def stream_sweep() -> list[str]:
    with audit_context.acting(services.SYSTEM_BEAT):
        return streaming.streams_sweep()
