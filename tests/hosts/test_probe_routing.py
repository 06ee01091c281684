"""Scheduled probes spread over the workers: each host to the same worker round after round,
through the real Redis registry and real Celery workers."""

from __future__ import annotations

import re
import uuid
from collections import Counter

import pytest

from controlplane.celery import app
from hosts.models import Host, StateSnapshot
from hosts.services import probe_routing
from tests.fleet import register
from tests.waiting import wait_until
from tests.workers import spawn_worker

QUEUES = ["q.probe.a", "q.probe.b", "q.probe.c"]


def test_each_host_has_one_owner_and_the_load_is_spread() -> None:
    owners = {h: probe_routing.probe_owner(h, QUEUES) for h in range(3000)}
    assert owners == {h: probe_routing.probe_owner(h, list(reversed(QUEUES))) for h in owners}
    counts = Counter(owners.values())
    assert set(counts) == set(QUEUES)
    assert min(counts.values()) > 800  # about a third each


def test_a_worker_joining_takes_hosts_only_from_the_others_and_only_its_share() -> None:
    before = {h: probe_routing.probe_owner(h, QUEUES) for h in range(3000)}
    after = {h: probe_routing.probe_owner(h, [*QUEUES, "q.probe.d"]) for h in range(3000)}
    moved = [h for h in before if before[h] != after[h]]
    assert all(after[h] == "q.probe.d" for h in moved)
    assert 600 < len(moved) < 900  # a quarter
    # and one leaving gives back exactly its own hosts
    assert {h: probe_routing.probe_owner(h, QUEUES) for h in after} == before


def test_batches_hold_at_most_the_batch_size_and_one_owner_each() -> None:
    hosts = [(h, 60 if h % 2 else 30) for h in range(1, 101)]
    batches = probe_routing.probe_batches(hosts, QUEUES, 20)
    assert sorted(h for _, ids, _ in batches for h in ids) == list(range(1, 101))
    for queue, ids, interval in batches:
        assert len(ids) <= 20
        assert {probe_routing.probe_owner(h, QUEUES) for h in ids} == {queue}
        assert interval == min(60 if h % 2 else 30 for h in ids)
    # no worker known: one shared queue
    assert {queue for queue, _, _ in probe_routing.probe_batches(hosts, [], 50)} == {None}


@pytest.mark.integration
def test_the_registry_on_redis_forgets_silent_workers() -> None:
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = f"test-registry-{uuid.uuid4().hex[:8]}"
    try:
        assert probe_routing.probe_worker_announce("w1", now=1000.0)
        assert probe_routing.probe_worker_announce("w2", now=1025.0)
        assert probe_routing.probe_workers_live(now=1026.0) == ["w1", "w2"]
        assert probe_routing.probe_workers_live(now=1040.0) == ["w2"]  # w1 silent for 40 s
        probe_routing.probe_worker_leave("w2")
        assert probe_routing.probe_workers_live(now=1041.0) == []
    finally:
        app.conf.task_default_queue = previous


@pytest.mark.integration
def test_a_sweep_hands_each_worker_the_hosts_it_owns(make_fleet, transactional_db, tmp_path):
    fleet = register(make_fleet(12))
    queue = f"test-{uuid.uuid4().hex[:12]}"
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    workers = [spawn_worker(queue, tmp_path / f"worker{i}.log") for i in (1, 2)]
    try:
        for worker in workers:
            worker.wait_ready()
        live = wait_until(lambda: (q := probe_routing.probe_workers_live()) and len(q) == 2 and q)
        owners = {h.pk: probe_routing.probe_owner(h.pk, live) for h in fleet.hosts}
        assert set(owners.values()) == set(live)  # 12 hosts: both get some

        for _round in (1, 2):
            Host.objects.update(last_probe_at=None)
            before = StateSnapshot.objects.count()
            assert probe_routing.probe_sweep() == 12
            wait_until(lambda b=before: StateSnapshot.objects.count() == b + 12, timeout=60)

        # Each worker ran batches from its own queue only, holding the hosts it owns.
        for worker in workers:
            own = next(q for q in live if f".{worker.proc.pid}" in q)
            log = worker.output()
            received = re.findall(r"Task hosts\.tasks\.probe_batch\[[^\]]+\] received", log)
            assert len(received) == 2, log[-3000:]  # one batch a round: it owns under 250
            assert own in live
        statuses = set(StateSnapshot.objects.values_list("status", flat=True))
        assert statuses == {"ok"}
    finally:
        app.conf.task_default_queue = previous
        for worker in workers:
            worker.stop()
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(queue)


@pytest.mark.django_db
def test_a_whole_fleet_due_at_once_is_spread_over_several_sweeps(settings) -> None:
    from hosts.services import hosts_claim_due_ids
    from tests import factories as f

    settings.PROBE_SWEEP_SECONDS, settings.PROBE_SWEEP_MIN_HOSTS = 5, 1
    credential = f.make_host("seed").credential
    Host.objects.bulk_create(
        Host(name=f"n{i:03d}", address="127.0.0.1", credential=credential) for i in range(119)
    )
    # 120 hosts every 60 s: 10 fall due per 5 s sweep, so a sweep takes at most 20
    assert probe_routing.sweep_limit() == 20
    first = hosts_claim_due_ids(limit=probe_routing.sweep_limit())
    second = hosts_claim_due_ids(limit=probe_routing.sweep_limit())
    assert len(first) == len(second) == 20
    assert not {pk for pk, _ in first} & {pk for pk, _ in second}
