"""Scheduled probing across any number of Celery workers, each keeping its connections warm.

Beat runs `probe_sweep` every PROBE_SWEEP_SECONDS on some worker. It claims the hosts that are
due (one locked UPDATE, `hosts_claim_due_for_probe`), and hands them out as `probe_batch` tasks
of at most PROBE_BATCH_SIZE hosts.

Which worker gets a host is decided by rendezvous hashing over the probe workers alive now, so
a host goes to the same worker process round after round and that process's asyncssh pool
(hosts.ssh.ssh_loop) already holds its connection: a warm probe costs a fraction of a new key
exchange on both ends. When a worker joins or leaves, only the hosts it gains or loses move.

Each probe worker consumes a queue of its own (`<default queue>.probe.<node>.<pid>`, added when
the worker starts, hosts.tasks) and announces it in a Redis sorted set every few seconds; a
worker not heard from for PROBE_WORKER_TTL_SECONDS is left out. The set is named after the
database and the default queue, so two deployments (or two test runs) sharing a Redis never
route to each other. With no probe worker known (no Redis, or none started yet), batches go to
the default queue and any worker takes them: still correct, only colder.

A batch carries an expiry of its hosts' interval: one that waited longer (its worker died with
it queued) is dropped. Its hosts were never marked probed, only claimed; once the claim expires
(`claim_expiry_seconds`) they are the most overdue hosts, claimed first by the next sweep and
routed to a live worker. A host whose worker died therefore misses about one interval.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from celery import current_app
from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from .. import dispatch
from ..models import Host
from .probe_claims import hosts_claim_due_ids

logger = logging.getLogger(__name__)

REGISTRY_PREFIX = "controlplane:probe-workers"
_client_lock = threading.Lock()
_clients: dict[str, Any] = {}


def _redis() -> Any | None:
    """A Redis client for the broker's server, or None when the broker is not Redis."""
    url = str(settings.CELERY_BROKER_URL)
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return None
    import redis

    with _client_lock:
        client = _clients.get(url)
        if client is None:
            client = _clients[url] = redis.Redis.from_url(
                url, socket_timeout=3, socket_connect_timeout=3
            )
        return client


def registry_key(default_queue: str | None = None) -> str:
    database = settings.DATABASES["default"]["NAME"]
    queue = default_queue or current_app.conf.task_default_queue
    return f"{REGISTRY_PREFIX}:{database}:{queue}"


def probe_queue_name(node: str, pid: int, default_queue: str | None = None) -> str:
    return f"{default_queue or current_app.conf.task_default_queue}.probe.{node}.{pid}"


def probe_worker_announce(queue: str, *, now: float | None = None) -> bool:
    """Say that the worker consuming `queue` is alive (its heartbeat); False without Redis."""
    client = _redis()
    if client is None:
        return False
    key = registry_key()
    try:
        client.zadd(key, {queue: now if now is not None else time.time()})
        client.expire(key, 86400)
    except Exception:  # the broker being down must not kill the worker's heartbeat
        logger.warning("cannot announce probe worker %s", queue, exc_info=True)
        return False
    return True


def probe_worker_leave(queue: str) -> None:
    client = _redis()
    if client is None:
        return
    try:
        client.zrem(registry_key(), queue)
    except Exception:
        logger.warning("cannot withdraw probe worker %s", queue, exc_info=True)


def probe_workers_live(*, now: float | None = None) -> list[str]:
    """The queues of probe workers heard from within PROBE_WORKER_TTL_SECONDS, sorted."""
    client = _redis()
    if client is None:
        return []
    now = now if now is not None else time.time()
    key = registry_key()
    try:
        client.zremrangebyscore(key, "-inf", now - settings.PROBE_WORKER_TTL_SECONDS)
        members = client.zrange(key, 0, -1)
    except Exception:
        logger.warning("cannot read the probe worker registry", exc_info=True)
        return []
    return sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)


def probe_owner(host_id: int, queues: Sequence[str]) -> str:
    """The worker queue that probes `host_id`: the highest hash of (queue, host) wins."""

    def weight(queue: str) -> bytes:
        return hashlib.blake2b(f"{queue}\x00{host_id}".encode(), digest_size=8).digest()

    return max(queues, key=weight)


def probe_batches(
    hosts: Sequence[tuple[int, int]], queues: Sequence[str], size: int
) -> list[tuple[str | None, list[int], int]]:
    """`(queue or None, host ids, shortest interval)` per batch of `(host id, interval)`."""
    groups: dict[str | None, list[tuple[int, int]]] = defaultdict(list)
    for host_id, interval in hosts:
        groups[probe_owner(host_id, queues) if queues else None].append((host_id, interval))
    batches = []
    for queue, members in sorted(groups.items(), key=lambda kv: kv[0] or ""):
        for start in range(0, len(members), size):
            chunk = members[start : start + size]
            batches.append((queue, [h for h, _ in chunk], min(i for _, i in chunk)))
    return batches


def sweep_limit() -> int:
    """How many hosts one sweep may claim: twice what falls due per sweep in steady state.

    A fleet that is all due at once (the first start, or after an outage) is then spread over
    about half an interval instead of opening every connection in the same second, and
    workers that fall behind are not handed more than they can catch up with.
    """
    sweep = settings.PROBE_SWEEP_SECONDS
    per_interval = (
        Host.objects.filter(enabled=True)
        .values_list("probe_interval_seconds")
        .annotate(n=Count("pk"))
        .order_by()
    )
    expected = sum(n * sweep / max(interval, sweep) for interval, n in per_interval)
    wanted = max(settings.PROBE_SWEEP_MIN_HOSTS, math.ceil(2 * expected))
    return min(wanted, settings.PROBE_SWEEP_MAX_HOSTS)


def probe_sweep(*, now: datetime | None = None) -> int:
    """Claim the hosts due before the next sweep and queue their probes; how many hosts."""
    now = now or timezone.now()
    claimed = hosts_claim_due_ids(
        now, lookahead_seconds=settings.PROBE_SWEEP_SECONDS, limit=sweep_limit()
    )
    if not claimed:
        return 0
    queues = probe_workers_live()
    for queue, host_ids, interval in probe_batches(claimed, queues, settings.PROBE_BATCH_SIZE):
        options: dict[str, Any] = {"expires": max(interval, settings.PROBE_SWEEP_SECONDS)}
        if queue is not None:
            options["queue"] = queue
        dispatch.send(dispatch.PROBE_BATCH, kwargs={"host_ids": host_ids}, **options)
    return len(claimed)
