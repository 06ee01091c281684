"""The pages people keep open do a fixed number of queries however many rows there are: the
fleet page, a host's page, the approvals queue and the audit history. (How fast they are at
10,000 hosts is measured in bench/pages_scale.py, not here.)"""

from __future__ import annotations

import datetime as dt
import html
import re
from collections.abc import Iterable

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from controlplane.accounts.models import HostGroup
from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from controlplane.audit.selectors import EventFilter, events_filtered
from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest
from deployments.services import change_request_create
from hosts import selectors
from hosts.choices import HostKeyStatus
from hosts.models import Host, HostHealth, StateSnapshot
from hosts.state import snapshot_digest
from tests import factories as f

pytestmark = pytest.mark.django_db


def queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, response.content[:500]
    return len(captured)


def add_hosts(count: int, start: int = 0) -> list[Host]:
    credential = f.make_host(f"seed-{start}").credential
    hosts = Host.objects.bulk_create(
        Host(name=f"node-{start + i:05d}", address="127.0.0.1", port=2201, credential=credential,
             host_key=f.HOST_KEY, host_key_status=HostKeyStatus.PINNED)
        for i in range(count)
    )  # fmt: skip
    now = timezone.now()
    parsed = f.parsed_state()
    snapshots = StateSnapshot.objects.bulk_create(
        StateSnapshot(host=h, taken_at=now, status="ok", trigger="schedule", duration_ms=50,
                      parsed=parsed, digest=snapshot_digest(parsed))
        for h in hosts
    )  # fmt: skip
    HostHealth.objects.bulk_create(
        HostHealth(host=h, verdict="healthy", severity=0, since=now, computed_at=now, snapshot=s)
        for h, s in zip(hosts, snapshots, strict=True)
    )
    return hosts


def add_history(host: Host, count: int) -> None:
    now = timezone.now()
    parsed = f.parsed_state()
    StateSnapshot.objects.bulk_create(
        StateSnapshot(host=host, taken_at=now - dt.timedelta(minutes=i), status="ok",
                      trigger="schedule", duration_ms=50, parsed=parsed,
                      digest=snapshot_digest(parsed))
        for i in range(count)
    )  # fmt: skip


def test_the_fleet_page_does_not_load_every_host(client, viewer, django_assert_max_num_queries):
    client.force_login(viewer)
    add_hosts(3)
    few = queries(client, reverse("hosts:dashboard"))
    add_hosts(57, start=3)
    # hosts that cannot be read now show their last good snapshot: still no query per row
    unreadable(Host.objects.order_by("name")[:20])
    with django_assert_max_num_queries(few):
        client.get(reverse("hosts:dashboard"))
    with django_assert_max_num_queries(few):
        client.get(reverse("hosts:dashboard") + "?sort=age&page=2")
    with django_assert_max_num_queries(few):
        client.get(reverse("hosts:dashboard_rows") + "?sort=name")
    many = queries(client, reverse("hosts:dashboard") + "?verdict=failed&q=node")
    assert many <= few
    # the rows' refresh every 15 s does without the verdict counts it does not show
    assert queries(client, reverse("hosts:dashboard_rows")) < few
    body = client.get(reverse("hosts:dashboard")).content.decode()
    assert 0 < body.count('id="host-row-') <= 50
    assert "last known good" in body


def test_a_scoped_fleet_page_reads_a_fixed_number_of_queries(
    client, scoped, django_assert_max_num_queries
):
    """Someone whose role holds on one host group: the same fixed number of queries, the
    scope read once and applied inside the page's queries, whatever the fleet's size."""
    team = HostGroup.objects.create(name="team-a")
    HostGroup.objects.create(name="prod")
    client.force_login(scoped("tess", "operator", "team-a"))
    team.hosts.add(*add_hosts(3))
    few = queries(client, reverse("hosts:dashboard"))
    team.hosts.add(*add_hosts(57, start=3))
    add_hosts(40, start=60)  # the other team's: neither listed nor counted
    with django_assert_max_num_queries(few):
        body = client.get(reverse("hosts:dashboard")).content.decode()
    with django_assert_max_num_queries(few):
        client.get(reverse("hosts:dashboard_rows") + "?group=team-a&page=2")
    assert ">60 healthy<" in body and "(60 hosts)" in body
    assert body.count("Probe now") == 50  # her role holds on every host of the page


def unreadable(hosts: Iterable[Host]) -> None:
    """Each host's newest probe failed; its health keeps the snapshot before as last good."""
    now = timezone.now()
    for host in hosts:
        good = host.snapshots.get()
        failed = StateSnapshot.objects.create(
            host=host, taken_at=now, status="unreachable", trigger="schedule", duration_ms=50,
            parsed={}, digest=snapshot_digest({}),
        )  # fmt: skip
        HostHealth.objects.filter(host=host).update(
            verdict="failed", severity=3, snapshot=failed, last_good_snapshot=good
        )


def fleet_names(client, query: str = "") -> list[str]:
    body = client.get(reverse("hosts:dashboard") + query).content.decode()
    return re.findall(r'data-host="([^"]+)"', body)


def test_the_fleet_page_two_shows_the_rest(client, viewer):
    client.force_login(viewer)
    add_hosts(60)
    first = fleet_names(client, "?sort=name&q=node-")
    second = fleet_names(client, "?sort=name&q=node-&page=2")
    assert first == [f"node-{i:05d}" for i in range(50)]
    assert second == [f"node-{i:05d}" for i in range(50, 60)]
    body = client.get(reverse("hosts:dashboard") + "?sort=name&q=node-").content.decode()
    assert "page 1 of 2 (60 hosts)" in body
    assert 'href="?sort=name&amp;q=node-&page=2"' in body
    # the rows of page 2 refresh as page 2, with the same filters
    body = client.get(reverse("hosts:dashboard") + "?sort=name&q=node-&page=2").content.decode()
    poll = html.unescape(re.findall(r'<tbody hx-get="([^"]+)"', body)[0])
    assert poll == "/hosts/rows/?sort=name&q=node-&page=2"
    assert re.findall(r'data-host="([^"]+)"', client.get(poll).content.decode()) == second


@pytest.mark.parametrize(
    ("page", "shown", "note"),
    [
        ("99", 2, "There is no page 99: this is the last page, 2."),
        ("9" * 5000, 2, "this is the last page, 2."),
        ("abc", 1, "“abc” is not a page number: this is page 1."),
        ("0", 1, "“0” is not a page number"),
        ("-1", 1, "“-1” is not a page number"),
        ("²", 1, "“²” is not a page number"),
    ],
)
def test_a_page_that_does_not_exist_gets_the_nearest_and_says_so(client, viewer, page, shown, note):
    client.force_login(viewer)
    add_hosts(60)
    for url in (reverse("hosts:dashboard"), reverse("hosts:dashboard_rows")):
        response = client.get(url, {"sort": "name", "q": "node-", "page": page})
        assert response.status_code == 200
    body = client.get(
        reverse("hosts:dashboard"), {"sort": "name", "q": "node-", "page": page}
    ).content.decode()
    assert note in body
    assert f"page {shown} of 2" in body
    names = re.findall(r'data-host="([^"]+)"', body)
    assert names[0] == ("node-00050" if shown == 2 else "node-00000")  # the other filters hold


def test_a_host_page_with_a_long_history(client, viewer, django_assert_max_num_queries):
    client.force_login(viewer)
    host = f.make_host("gpu-01")
    f.make_deployment(host, f.make_catalog()["NVFP4"])
    add_history(host, 10)
    url = reverse("hosts:detail", args=[host.name])
    few = queries(client, url)
    add_history(host, 2000)
    with django_assert_max_num_queries(few):
        client.get(url)
    with django_assert_max_num_queries(6):  # session, user, host, buckets, events' snapshot
        client.get(reverse("hosts:gpu_series", args=[host.name]) + "?window=7d")


def waiting_changes(count: int, catalog: dict) -> list[ChangeRequest]:
    """`count` model swaps waiting for approval, a minute apart, the first the oldest."""
    host = Host.objects.filter(name="appr-01").first() or f.make_host("appr-01", port=2201)
    deployment = host.deployments.first() or f.make_deployment(host, catalog["NVFP4"])
    snapshot = f.make_snapshot(host)
    start = ChangeRequest.objects.count()
    changes = ChangeRequest.objects.bulk_create(
        ChangeRequest(host=host, deployment=deployment, kind="model_swap", snapshot=snapshot,
                      reason=f"faster {start + i}", requested_by_name="otto", needs_approval=True,
                      params_digest="-", correlation_id=f"c-{start + i}",
                      status=ChangeStatus.PENDING_APPROVAL)
        for i in range(count)
    )  # fmt: skip
    base = timezone.now() - dt.timedelta(days=1)
    for i, change in enumerate(changes, start=start):
        ChangeRequest.objects.filter(pk=change.pk).update(created_at=base + dt.timedelta(minutes=i))
    return changes


def test_the_approvals_queue_with_many_waiting(
    client, approver, operator, django_assert_max_num_queries
):
    client.force_login(approver)
    catalog = f.make_catalog()
    waiting_changes(3, catalog)
    few = queries(client, reverse("deployments:approvals"))
    waiting_changes(57, catalog)
    # a swap as the form requests it names the revision and model it swaps to
    host = f.make_host("gpu-swap")
    swap = change_request_create(
        user=operator, deployment=f.make_deployment(host, catalog["NVFP4"]), kind="model_swap",
        snapshot=f.make_snapshot(host), reason="faster", model=catalog["INT4"],
    )  # fmt: skip
    ChangeRequest.objects.filter(pk=swap.pk).update(
        created_at=timezone.now() - dt.timedelta(days=2)
    )
    with django_assert_max_num_queries(few):
        body = client.get(reverse("deployments:approvals")).content.decode()
    assert f"→ {catalog['INT4']}" in body
    with django_assert_max_num_queries(few):
        client.get(reverse("deployments:approvals"))
    with django_assert_max_num_queries(few):
        client.get(reverse("deployments:approvals") + "?page=2")


def approval_ids(body: str) -> list[int]:
    return [int(pk) for pk in re.findall(r">#(\d+)</a>", body)]


def test_the_approvals_queue_page_two_shows_the_rest_oldest_first(client, approver):
    client.force_login(approver)
    changes = waiting_changes(60, f.make_catalog())
    ChangeRequest.objects.filter(pk=changes[-1].pk).update(status=ChangeStatus.QUEUED)
    first = client.get(reverse("deployments:approvals")).content.decode()
    second = client.get(reverse("deployments:approvals") + "?page=2").content.decode()
    assert approval_ids(first) == [c.pk for c in changes[:50]]
    assert approval_ids(second) == [c.pk for c in changes[50:59]]  # the approved one is gone
    assert "59 waiting" in first and "59 waiting" in second
    assert "page 1 of 2" in first and 'href="?page=2"' in first
    assert "page 2 of 2" in second and 'href="?page=1"' in second


@pytest.mark.parametrize(
    ("page", "note"),
    [
        ("7", "There is no page 7: this is the last page, 2."),
        ("x", "“x” is not a page number: this is page 1."),
        ("<b>", "“&lt;b&gt;” is not a page number"),
    ],
)
def test_a_page_of_approvals_that_does_not_exist_says_so(client, approver, page, note):
    client.force_login(approver)
    waiting_changes(60, f.make_catalog())
    response = client.get(reverse("deployments:approvals"), {"page": page})
    assert response.status_code == 200
    assert note in response.content.decode()


def test_an_empty_approvals_queue_has_no_pages(client, approver):
    client.force_login(approver)
    body = client.get(reverse("deployments:approvals"), {"page": "2"}).content.decode()
    assert "0 waiting" in body and "Nothing waits." in body
    assert 'id="approvals-pages"' not in body


def test_the_audit_history_during_a_probe_storm(client, viewer, django_assert_max_num_queries):
    client.force_login(viewer)
    host = f.make_host("gpu-01")

    def storm(count: int) -> None:
        snapshot = f.make_snapshot(host)
        audit.record_many(
            [{"action": AuditAction.PROBE_COMPLETED, "target": snapshot, "host": host,
              "snapshot": snapshot, "data": {"status": "ok", "trigger": "manual"}}] * count
        )  # fmt: skip

    storm(5)
    few = queries(client, reverse("audit:history"))
    storm(500)
    with django_assert_max_num_queries(few):
        client.get(reverse("audit:history"))
    with django_assert_max_num_queries(few):
        client.get(reverse("audit:history") + f"?host={host.name}&action=probe.completed")


def host_events(host: Host, count: int) -> None:
    """`count` probe events of `host`, between as many of another host's."""
    other = Host.objects.filter(name="gpu-02").first() or f.make_host("gpu-02")
    snapshot = f.make_snapshot(host)
    audit.record_many(
        [{"action": AuditAction.PROBE_COMPLETED, "target": snapshot, "host": h,
          "snapshot": snapshot, "data": {"status": "ok", "trigger": "schedule"}}
         for _ in range(count) for h in (host, other)]
    )  # fmt: skip


def event_seqs(body: str) -> list[int]:
    return [int(seq) for seq in re.findall(r'<tr id="event-(\d+)">', body)]


def test_the_audit_history_of_one_host(client, viewer, django_assert_max_num_queries):
    client.force_login(viewer)
    host = f.make_host("gpu-01")
    host_events(host, 3)
    url = reverse("audit:history") + f"?host={host.name}"
    few = queries(client, url)
    host_events(host, 57)
    with django_assert_max_num_queries(few):
        first = client.get(url).content.decode()
    ours = list(
        AuditEvent.objects.filter(host_label=host.name)
        .order_by("-seq")
        .values_list("seq", flat=True)
    )
    assert len(ours) > 60 and event_seqs(first) == ours[:50]
    older = re.search(r'href="/audit/\?host=gpu-01&(?:amp;)?before=(\d+)"', first)
    assert older is not None
    with django_assert_max_num_queries(few):
        second = client.get(url + f"&before={older[1]}").content.decode()
    assert event_seqs(second) == ours[50:100]
    # a cursor that is not a number is ignored: the newest events, not an error
    response = client.get(url + "&before=abc")
    assert response.status_code == 200
    assert event_seqs(response.content.decode()) == ours[:50]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plan")
def test_the_history_of_a_host_by_name_reads_an_index(client, viewer):
    """A host's name in the filter form (`?host=gpu-01`) walks the index on (host_label, seq):
    without it, PostgreSQL scanned the whole audit table for one host's page (bench/README)."""
    query = events_filtered(filters=EventFilter(host="gpu-01"), user=viewer)
    query = query.order_by("-seq")[:51]
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = query.explain()
    assert "audit_host_label_seq" in plan


def test_a_host_page_lists_its_newest_snapshots_newest_first(client, viewer):
    client.force_login(viewer)
    host = f.make_host("gpu-01")
    other = f.make_host("gpu-02", port=2202)
    add_history(host, 60)
    f.make_snapshot(other)  # a newer snapshot of another host is not this host's
    ours = list(
        StateSnapshot.objects.filter(host=host)
        .order_by("-taken_at", "-id")
        .values_list("pk", flat=True)
    )
    body = client.get(reverse("hosts:detail", args=[host.name])).content.decode()
    listed = [int(pk) for pk in re.findall(r'href="/snapshots/(\d+)/"', body)]
    assert listed[-50:] == ours[:50]
    assert selectors.latest_snapshot(host).pk == ours[0]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plan")
def test_a_hosts_newest_snapshots_are_found_in_its_index(viewer):
    """Every "newest snapshot of a host" orders by (taken_at, id): the index holds both, so the
    ids come from an index-only scan, however many other hosts were probed since."""
    host = f.make_host("gpu-01")
    add_history(host, 200)
    newest = host.snapshots.order_by("-taken_at", "-id").values("id")[:50]
    with connection.cursor() as cursor:
        # Only an index that holds the whole order can serve the query without a sort; with
        # sorting and table scans priced out, the plan shows whether there is one.
        cursor.execute("ANALYZE hosts_statesnapshot")
        for setting in ("enable_seqscan", "enable_sort", "enable_incremental_sort"):
            cursor.execute(f"SET LOCAL {setting} = off")
        plan = newest.explain()
    assert "snapshot_host_newest" in plan and "Sort" not in plan
