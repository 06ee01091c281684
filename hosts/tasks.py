"""Celery tasks: thin wrappers that load rows and call hosts.services.

Scheduled probing is spread over the workers (hosts.services.probe_routing): each probe worker
consumes a queue of its own, named here when it starts, and announces it while it lives.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from celery import current_app, shared_task
from celery.signals import celeryd_after_setup, worker_ready, worker_shutdown
from django.conf import settings
from django.contrib.auth.models import User

from controlplane.audit import context as audit_context
from controlplane.audit.services import SYSTEM_BEAT, SYSTEM_WORKER

from . import dispatch, services
from .choices import ProbeTrigger
from .models import Host
from .services import dictionaries, probe_routing, retention

logger = logging.getLogger(__name__)


@shared_task(name=dispatch.PROBE_HOST, acks_late=True)
def probe_host(
    host_id: int,
    trigger: str = ProbeTrigger.MANUAL,
    integrity: bool | None = None,
    user_id: int | None = None,
    correlation_id: str = "",
) -> int | None:
    host = Host.objects.select_related("credential").filter(pk=host_id).first()
    if host is None:
        return None
    actor = User.objects.filter(pk=user_id).first() if user_id else None
    with audit_context.acting(actor or SYSTEM_WORKER, correlation_id=correlation_id or None):
        return services.host_probe(host=host, trigger=trigger, integrity=integrity).pk


@shared_task(name=dispatch.PROBE_DUE_HOSTS, acks_late=True)
def probe_due_hosts() -> int:
    """Beat's sweep: claim the hosts due and queue them in batches to their workers."""
    with audit_context.acting(SYSTEM_BEAT):
        return probe_routing.probe_sweep()


@shared_task(name=dispatch.PROBE_BATCH, acks_late=True)
def probe_batch(host_ids: list[int]) -> int:
    """One batch of a sweep: probe these hosts over this process's warm connections."""
    with audit_context.acting(SYSTEM_BEAT):
        hosts = list(
            Host.objects.filter(pk__in=host_ids, enabled=True)
            .select_related("credential")
            .prefetch_related("deployments")
        )
        if hosts:
            services.hosts_probe(hosts=hosts, trigger=ProbeTrigger.SCHEDULE)
        return len(hosts)


@shared_task(name=dispatch.THIN_SNAPSHOTS, acks_late=True)
def thin_snapshots() -> dict[str, Any]:
    """Beat's retention run, bounded to half its interval; the next run goes on from there."""
    budget = settings.SNAPSHOT_RETENTION_SWEEP_SECONDS / 2
    result = retention.snapshots_thin(time_budget=budget)
    logger.info("snapshot retention: %s", result.summary())
    return {"removed": result.removed, "examined": result.examined, "done": result.finished}


@shared_task(name=dispatch.TRAIN_SECTION_DICTIONARY, acks_late=True)
def train_section_dictionary() -> int | None:
    """Beat's look, hourly: a new compression dictionary once one is due (the id, or None)."""
    made = dictionaries.section_dictionary_train_if_due(settings.SECTION_DICTIONARY_EVERY_SECONDS)
    if made is not None:
        logger.info("section dictionary %s in use (%s bytes)", made.pk, len(made.content))
    return made.pk if made is not None else None


@shared_task(name=dispatch.END_MAINTENANCE, acks_late=True)
def end_maintenance() -> int:
    """Beat's sweep: end each maintenance whose end time has passed (once per host, however
    often this runs)."""
    with audit_context.acting(SYSTEM_BEAT):
        return len(services.hosts_maintenance_expire())


# --- this worker's own probe queue -------------------------------------------------------------

_probe_queue: dict[str, str] = {}
_stop = threading.Event()


@celeryd_after_setup.connect
def _add_probe_queue(sender: str, instance: Any, **kwargs: Any) -> None:
    if not settings.PROBE_WORKER:
        return
    queue = probe_routing.probe_queue_name(
        sender, os.getpid(), instance.app.conf.task_default_queue
    )
    instance.app.amqp.queues.select_add(queue)
    _probe_queue["name"] = queue


@worker_ready.connect
def _announce_probe_queue(**kwargs: Any) -> None:
    queue = _probe_queue.get("name")
    if queue is None:
        return
    every = max(1.0, settings.PROBE_WORKER_TTL_SECONDS / 3)

    def heartbeat() -> None:
        while not _stop.is_set():
            probe_routing.probe_worker_announce(queue)
            _stop.wait(every)

    threading.Thread(target=heartbeat, name="probe-worker-heartbeat", daemon=True).start()


@worker_shutdown.connect
def _withdraw_probe_queue(sender: Any = None, **kwargs: Any) -> None:
    queue = _probe_queue.pop("name", None)
    _stop.set()
    if queue is None:
        return
    probe_routing.probe_worker_leave(queue)
    try:
        with current_app.connection_for_write() as conn:
            conn.default_channel.queue_delete(queue)  # type: ignore[attr-defined]
    except Exception:  # a broker already gone: the queue's leftovers expire with their tasks
        logger.warning("cannot delete probe queue %s", queue, exc_info=True)
