"""Celery tasks: thin wrappers that load rows and call hosts.services."""

from __future__ import annotations

from celery import shared_task
from django.contrib.auth.models import User

from controlplane.audit import context as audit_context
from controlplane.audit.services import SYSTEM_BEAT, SYSTEM_WORKER

from . import services
from .choices import ProbeTrigger
from .models import Host


@shared_task(name="hosts.tasks.probe_host", acks_late=True)
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


@shared_task(name="hosts.tasks.probe_due_hosts", acks_late=True)
def probe_due_hosts() -> int:
    with audit_context.acting(SYSTEM_BEAT):
        hosts = services.hosts_claim_due_for_probe()
        if hosts:
            services.hosts_probe(hosts=hosts, trigger=ProbeTrigger.SCHEDULE)
        return len(hosts)
