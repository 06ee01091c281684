"""The fleet page's verdict order from an index: each host's verdict severity is copied onto
its row by a trigger on the verdict table (migration hosts 0012), whoever writes the verdict,
and the verdict writer takes the locks in the one order every writer takes them."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone

from controlplane.audit import services as audit
from deployments import services as deployment_services
from hosts import selectors
from hosts.choices import VERDICT_SEVERITY
from hosts.models import Host, HostHealth
from tests import factories as f

pytestmark = pytest.mark.django_db
postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="PostgreSQL's plan and row locks"
)


def severity(host: Host) -> int | None:
    return Host.objects.values_list("verdict_severity", flat=True).get(pk=host.pk)


def test_every_write_of_a_verdict_row_is_copied_onto_its_host() -> None:
    host, other = f.make_host("gpu-01"), f.make_host("gpu-02", port=2202)
    assert severity(host) is None  # never judged
    now = timezone.now()
    health = HostHealth.objects.create(
        host=host, verdict="failed", severity=VERDICT_SEVERITY["failed"], since=now,
        computed_at=now,
    )  # fmt: skip
    assert severity(host) == 4 and severity(other) is None
    HostHealth.objects.filter(pk=health.pk).update(verdict="healthy", severity=0)
    assert severity(host) == 0
    health.delete()
    assert severity(host) is None


def test_the_verdict_service_upsert_is_copied_too() -> None:
    host = f.make_host("gpu-01")
    f.make_snapshot(host)
    rows = deployment_services.hosts_health_update(hosts=[host])
    assert severity(host) == rows[0].severity
    HostHealth.objects.filter(host=host).update(severity=4)  # as if it had been failed
    rows = deployment_services.hosts_health_update(hosts=[host])  # ON CONFLICT DO UPDATE
    assert severity(host) == rows[0].severity != 4


def test_a_host_saved_whole_from_an_old_copy_is_put_right_by_the_next_verdict() -> None:
    """A whole-row save (the admin's) writes back the severity it loaded; the verdict service
    writes every host's verdict row each probe round, and the trigger copies it again."""
    host = f.make_host("gpu-01")
    f.make_snapshot(host)
    stale = Host.objects.get(pk=host.pk)  # loaded before the host was ever judged
    deployment_services.hosts_health_update(hosts=[host])
    stale.save()
    assert severity(host) is None
    rows = deployment_services.hosts_health_update(hosts=[host])  # the next round's
    assert severity(host) == rows[0].severity


def test_the_fleet_sorts_filters_and_counts_by_the_copied_verdict(client, viewer) -> None:
    now = timezone.now()
    judged = {"gpu-01": "healthy", "gpu-02": "failed", "gpu-03": "degraded", "gpu-04": None}
    for i, (name, verdict) in enumerate(judged.items()):
        host = f.make_host(name, port=2201 + i)
        if verdict:
            HostHealth.objects.create(host=host, verdict=verdict, since=now, computed_at=now,
                                      severity=VERDICT_SEVERITY[verdict])  # fmt: skip
    client.force_login(viewer)
    _, rows, _ = selectors.fleet_page(user=viewer)
    assert [r.host.name for r in rows] == ["gpu-04", "gpu-02", "gpu-03", "gpu-01"]
    _, failed, _ = selectors.fleet_page(user=viewer, verdict="failed")
    assert [r.host.name for r in failed] == ["gpu-02"]
    counts = selectors.fleet_counts(user=viewer).verdicts
    assert (counts["failed"], counts["healthy"], counts["unknown"]) == (1, 1, 1)
    body = client.get(reverse("hosts:dashboard")).content.decode()
    assert body.index("gpu-04") < body.index("gpu-02") < body.index("gpu-03") < body.index("gpu-01")


@postgresql_only
def test_the_first_fleet_page_in_verdict_order_reads_the_index(viewer) -> None:
    for i in range(30):
        f.make_host(f"gpu-{i:02d}", port=2201 + i)
    ids = Host.objects.order_by(*selectors.FLEET_ORDERS["verdict"]).values_list("pk", flat=True)[
        :50
    ]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE hosts_host")
        for setting in ("enable_seqscan", "enable_sort", "enable_incremental_sort"):
            cursor.execute(f"SET LOCAL {setting} = off")
        plan = ids.explain()
    assert "host_verdict_order" in plan and "Sort" not in plan, plan


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_a_verdict_written_while_a_probe_round_holds_the_host_does_not_deadlock() -> None:
    """A probe round locks its hosts' rows, then the audit chain. A verdict decided elsewhere
    (a change job ending) writes the host's row through the trigger: it must wait for the
    round at the host's row, not hold the chain while the round waits for it."""
    host = f.make_host("gpu-01")
    f.make_snapshot(host)
    holding, waited = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def probe_round() -> None:
        try:
            with transaction.atomic():
                Host.objects.filter(pk=host.pk).update(last_probe_at=timezone.now())
                holding.set()
                waited.wait(10)
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL lock_timeout = '5s'")
                audit.chain_lock()
        except BaseException as exc:  # reported by the test
            failures.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=probe_round)
    thread.start()
    try:
        assert holding.wait(10)
        timer = threading.Timer(0.5, waited.set)  # the verdict writer is waiting by then
        timer.start()
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '8s'")
        deployment_services.hosts_health_update(hosts=[host])  # inserts: the trigger writes
    finally:
        waited.set()
        thread.join(15)
    assert failures == []
    assert severity(host) is not None


@postgresql_only
def test_the_hosts_in_maintenance_are_counted_from_an_index() -> None:
    for i in range(30):
        f.make_host(f"gpu-{i:02d}", port=2201 + i)
    in_maintenance = Host.objects.filter(maintenance_until__gt=timezone.now())
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE hosts_host")
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = in_maintenance.explain()
    assert "host_maintenance_until" in plan, plan
