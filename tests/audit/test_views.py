"""The review UI: any role reads, nobody writes, outsiders are refused; filters, keyset pages,
one event with its diff and story, a host's timeline, streaming exports."""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
import json

import pytest
import time_machine
from django.contrib.auth.models import User
from django.db import connection
from django.template.loader import render_to_string
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from controlplane.audit import context, selectors, services
from controlplane.audit.chain import GENESIS_HASH, canonical_json
from controlplane.audit.models import AuditEvent
from hosts.models import Host, StateSnapshot

from .conftest import make_events, tamper


@pytest.fixture
def host(db: None) -> Host:
    return Host.objects.create(name="gpu-7", address="127.0.0.1")


@pytest.fixture
def event(db: None, host: Host) -> AuditEvent:
    return services.record(action="test.view", actor="system:test", target=host)


def _urls(event: AuditEvent, host: Host) -> list[str]:
    return [
        reverse("audit:history"),
        reverse("audit:event", args=[event.seq]),
        reverse("audit:host_timeline", args=[host.pk]),
        reverse("audit:export_csv"),
        reverse("audit:export_jsonl"),
    ]


def _body(response) -> str:  # type: ignore[no-untyped-def]
    if response.streaming:
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


def test_anonymous_visitors_are_sent_to_sign_in(
    client: Client, event: AuditEvent, host: Host
) -> None:
    for url in _urls(event, host):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("login")), url


def test_signed_in_users_without_a_role_are_refused(
    client: Client, outsider: User, event: AuditEvent, host: Host
) -> None:
    client.force_login(outsider)
    for url in _urls(event, host):
        assert client.get(url).status_code == 403, url


@pytest.mark.parametrize("persona", ["viewer", "operator", "approver", "admin_user"])
def test_every_role_can_read(
    request: pytest.FixtureRequest, client: Client, persona: str, event: AuditEvent, host: Host
) -> None:
    client.force_login(request.getfixturevalue(persona))
    for url in _urls(event, host):
        assert client.get(url).status_code == 200, url


def test_nobody_can_change_anything(
    client: Client, admin_user: User, event: AuditEvent, host: Host
) -> None:
    client.force_login(admin_user)
    before = list(AuditEvent.objects.values_list("seq", "hash"))
    for url in _urls(event, host):
        for method in (client.post, client.put, client.delete):
            assert method(url).status_code == 405, url
    assert list(AuditEvent.objects.values_list("seq", "hash")) == before


def test_admin_pages_are_read_only_too(client: Client, admin_user: User, event: AuditEvent) -> None:
    client.force_login(admin_user)
    change = reverse("admin:audit_auditevent_change", args=[event.seq])
    assert client.get(change).status_code == 200  # visible
    assert client.post(change, {"actor": "x"}).status_code == 403
    assert client.get(reverse("admin:audit_auditevent_add")).status_code == 403
    assert (
        client.post(
            reverse("admin:audit_auditevent_delete", args=[event.seq]), {"post": "yes"}
        ).status_code
        == 403
    )
    assert AuditEvent.objects.get(seq=event.seq).actor == "system:test"


# --- history -------------------------------------------------------------------------------


def _seqs(html: str) -> list[int]:
    import re

    return [int(s) for s in re.findall(r'<tr id="event-(\d+)"', html)]


def test_history_pages_by_keyset_without_counting(client: Client, viewer: User) -> None:
    make_events(120)
    client.force_login(viewer)
    last = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True)[0]
    with CaptureQueriesContext(connection) as queries:
        first = _body(client.get(reverse("audit:history")))
    assert not any("COUNT(" in q["sql"].upper() for q in queries.captured_queries)
    assert _seqs(first) == list(range(last, last - 50, -1))
    assert f"before={last - 49}" in first
    second = _body(client.get(reverse("audit:history"), {"before": last - 49}))
    assert _seqs(second) == list(range(last - 50, last - 100, -1))
    back = _body(client.get(reverse("audit:history"), {"after": last - 50}))
    assert _seqs(back) == list(range(last, last - 50, -1))
    oldest = _body(client.get(reverse("audit:history"), {"before": 21}))
    assert _seqs(oldest) == list(range(20, 0, -1))
    assert "before=" not in oldest.split("audit-table")[1]  # nothing older


def test_loading_older_events_with_htmx_returns_only_rows(client: Client, viewer: User) -> None:
    make_events(60)
    client.force_login(viewer)
    response = client.get(
        reverse("audit:history"),
        {"before": 11},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="audit-more",
    )
    html = _body(response)
    assert "<html" not in html and "<form" not in html
    assert _seqs(html) == list(range(10, 0, -1))
    response = client.get(
        reverse("audit:history"),
        {"action": "test.event"},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="audit-results",
    )
    html = _body(response)
    assert html.lstrip().startswith('<div id="audit-results">')
    assert "export.csv?action=test.event" in html
    assert response["HX-Push-Url"] == "/audit/?action=test.event"


@pytest.mark.parametrize(
    "params,expected_actions",
    [
        ({"actor": "otto"}, {"host.changed", "change.requested"}),
        ({"action": "change.requested"}, {"change.requested"}),
        ({"action": "change."}, {"change.requested", "change.approved"}),
        ({"host": "gpu-7"}, {"host.changed", "change.approved"}),
        ({"text": "Needle"}, {"change.approved"}),
        ({"text": "otto"}, {"host.changed", "change.requested"}),
        ({"correlation": "story-1"}, {"change.requested", "change.approved"}),
        ({"target": "hosts.host:HOSTPK"}, {"host.changed"}),
        ({"target": "gpu-7"}, {"host.changed"}),
        ({"since": "2026-02-01T00:00", "until": "2026-03-01T00:00"}, {"change.requested"}),
    ],
)
def test_history_filters(
    client: Client, viewer: User, operator: User, host: Host, params: dict, expected_actions: set
) -> None:
    with time_machine.travel(dt.datetime(2026, 1, 10, tzinfo=dt.UTC), tick=False):
        services.record(action="host.changed", actor=operator, target=host)
    with time_machine.travel(dt.datetime(2026, 2, 10, tzinfo=dt.UTC), tick=False):
        services.record(action="change.requested", actor=operator, correlation_id="story-1")
    with time_machine.travel(dt.datetime(2026, 3, 10, tzinfo=dt.UTC), tick=False):
        services.record(
            action="change.approved", actor="anna", host=host, correlation_id="story-1",
            data={"reason": "needle in the haystack"},
        )  # fmt: skip
    params = {k: v.replace("HOSTPK", str(host.pk)) for k, v in params.items()}
    client.force_login(viewer)
    html = _body(client.get(reverse("audit:history"), params))
    shown = set(AuditEvent.objects.filter(seq__in=_seqs(html)).values_list("action", flat=True))
    # (the personas and the host fixture leave events of their own: look at these three)
    assert shown & {"host.changed", "change.requested", "change.approved"} == expected_actions


def test_a_host_filter_still_finds_events_of_a_deleted_host(client: Client, viewer: User) -> None:
    gone = Host.objects.create(name="gpu-gone", address="127.0.0.1")
    services.record(action="test.gone", actor="system:test", target=gone)
    gone.delete()
    client.force_login(viewer)
    html = _body(client.get(reverse("audit:history"), {"host": "gpu-gone"}))
    actions = set(AuditEvent.objects.filter(seq__in=_seqs(html)).values_list("action", flat=True))
    assert actions == {"host.created", "test.gone", "host.deleted"}


def test_an_inverted_time_range_is_explained(client: Client, viewer: User) -> None:
    client.force_login(viewer)
    html = _body(
        client.get(
            reverse("audit:history"), {"since": "2026-03-01T00:00", "until": "2026-01-01T00:00"}
        )
    )
    assert "The time range ends before it starts." in html


def test_history_shows_the_last_verification(client: Client, viewer: User) -> None:
    client.force_login(viewer)  # (signing in is an event too)
    make_events(3)
    head = AuditEvent.objects.count()
    assert "not verified yet" in _body(client.get(reverse("audit:history")))
    services.verification_run(trigger="beat")
    html = _body(client.get(reverse("audit:history")))
    assert "chain verified" in html and f"{head} events up to #{head}" in html
    tamper("DELETE FROM audit_auditevent WHERE seq = 2")
    services.verification_run(trigger="beat")
    html = _body(client.get(reverse("audit:history")))
    assert "failed verification" in html and "at #2 (gap)" in html


def test_history_shows_the_last_checkpoint(client: Client, viewer: User) -> None:
    client.force_login(viewer)
    make_events(4)
    services.checkpoint_write()
    head = AuditEvent.objects.count()
    assert f"Last checkpoint: #{head} at" in _body(client.get(reverse("audit:history")))


# --- one event -----------------------------------------------------------------------------


def test_the_event_page_shows_fields_snapshot_diff_and_story(
    client: Client, viewer: User, host: Host
) -> None:
    snapshot = StateSnapshot.objects.create(
        host=host,
        taken_at=dt.datetime.now(dt.UTC),
        status="ok",
        trigger="manual",
        duration_ms=5,
        digest="c" * 64,
    )
    with context.acting("otto", correlation_id="change-42"):
        first = services.record(action="change.requested", snapshot=snapshot, host=host)
        main = services.record(
            action="deployment.changed",
            target=host,
            snapshot=snapshot,
            data={
                "before": {"model": "kimi-int4", "port": 8000},
                "after": {"model": "kimi-nvfp4", "port": 8000, "tp": 8},
                "reason": "swap",
            },
        )
        last = services.record(action="change.succeeded", host=host)
    unrelated = services.record(action="test.other", actor="system:test")
    client.force_login(viewer)
    html = _body(client.get(reverse("audit:event", args=[main.seq])))
    assert f'href="/snapshots/{snapshot.pk}/"' in html
    assert "c" * 64 in html
    assert main.hash in html and main.prev_hash in html
    diff = {(r.field, r.before, r.after, r.change) for r in selectors.event_diff(event=main)}
    assert diff == {
        ("model", "kimi-int4", "kimi-nvfp4", "changed"),
        ("port", "8000", "8000", "same"),
        ("tp", "", "8", "added"),
    }
    assert "kimi-int4" in html and "kimi-nvfp4" in html
    assert "&quot;reason&quot;: &quot;swap&quot;" in html
    story = html.split('id="event-story"')[1]
    for e in (first, main, last):
        assert f'href="/audit/events/{e.seq}/"' in story
    assert f'href="/audit/events/{unrelated.seq}/"' not in story
    assert "correlation=change-42" in html


def test_an_unknown_event_is_a_404(client: Client, viewer: User) -> None:
    client.force_login(viewer)
    assert client.get(reverse("audit:event", args=[999999])).status_code == 404


def test_event_content_is_escaped(client: Client, viewer: User) -> None:
    evil = services.record(
        action="test.xss", actor="system:test", target=("x.y", "1", "<script>alert(1)</script>")
    )
    client.force_login(viewer)
    for url in (reverse("audit:event", args=[evil.seq]), reverse("audit:history")):
        html = _body(client.get(url))
        assert "<script>alert(1)</script>" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


# --- a host's timeline -----------------------------------------------------------------------


def test_the_host_timeline_lists_the_newest_events_of_that_host(db: None, host: Host) -> None:
    other = Host.objects.create(name="gpu-8", address="127.0.0.1")
    mine = [services.record(action=f"test.t{i}", actor="system:test", host=host) for i in range(25)]
    services.record(action="test.other", actor="system:test", host=other)
    timeline = selectors.host_timeline(host.pk)
    assert [e.seq for e in timeline] == [e.seq for e in reversed(mine)][:20]
    assert [e.seq for e in selectors.host_timeline(host.pk, limit=3)] == [
        e.seq for e in reversed(mine)
    ][:3]
    html = render_to_string("audit/partials/host_timeline.html", {"timeline_events": timeline})
    assert f'href="/audit/events/{mine[-1].seq}/"' in html
    assert f"/audit/?host={host.pk}" in html
    assert "test.other" not in html


def test_the_host_timeline_partial_is_served_alone(
    client: Client, viewer: User, host: Host
) -> None:
    services.record(action="test.partial", actor="system:test", host=host)
    client.force_login(viewer)
    html = _body(client.get(reverse("audit:host_timeline", args=[host.pk])))
    assert "<html" not in html and "test.partial" in html


# --- exports -------------------------------------------------------------------------------


def test_csv_export_streams_the_filtered_events(client: Client, viewer: User) -> None:
    make_events(3, action="test.keep")
    make_events(2, action="test.drop")
    services.record(action="test.keep", actor="system:test", request=None, data={"x": 1})
    client.force_login(viewer)
    response = client.get(reverse("audit:export_csv"), {"action": "test.keep"})
    assert response.streaming
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(_body(response))))
    assert [r["action"] for r in rows] == ["test.keep"] * 4
    assert [int(r["seq"]) for r in rows] == sorted(int(r["seq"]) for r in rows)
    assert json.loads(rows[-1]["data"]) == {"x": 1}


def test_csv_cells_cannot_become_spreadsheet_formulas(client: Client, viewer: User) -> None:
    from django.test import RequestFactory

    request = RequestFactory().get("/", HTTP_USER_AGENT='=HYPERLINK("http://evil")')
    services.record(action="test.formula", actor="system:test", request=request)
    client.force_login(viewer)
    rows = list(
        csv.DictReader(
            io.StringIO(_body(client.get(reverse("audit:export_csv"), {"action": "test.formula"})))
        )
    )
    assert rows[0]["user_agent"] == '\'=HYPERLINK("http://evil")'


def test_a_jsonl_export_of_everything_verifies_offline(client: Client, viewer: User) -> None:
    make_events(30)
    client.force_login(viewer)
    response = client.get(reverse("audit:export_jsonl"))
    assert response.streaming
    lines = _body(response).splitlines()
    assert len(lines) == AuditEvent.objects.count()
    previous = GENESIS_HASH
    for line in lines:
        event = json.loads(line)
        claimed = event.pop("hash")
        assert hashlib.sha256(canonical_json(event).encode()).hexdigest() == claimed
        assert event["prev_hash"] == previous
        previous = claimed


def test_an_export_with_an_invalid_filter_is_refused(client: Client, viewer: User) -> None:
    client.force_login(viewer)
    response = client.get(reverse("audit:export_csv"), {"since": "not a date"})
    assert response.status_code == 400


def test_time_filters_are_exact_even_when_clocks_disagree(client: Client, viewer: User) -> None:
    def at(stamp: str, action: str) -> AuditEvent:
        when = dt.datetime.fromisoformat(stamp).replace(tzinfo=dt.UTC)
        with time_machine.travel(when, tick=False):
            return services.record(action=action, actor="system:test")

    at("2026-04-01T09:00:00", "test.early")
    at("2026-04-01T10:00:00", "test.a")
    at("2026-04-01T09:59:59", "test.skewed")  # written later by a machine whose clock lags
    at("2026-04-01T10:00:02", "test.c")
    at("2026-04-01T11:00:00", "test.late")
    client.force_login(viewer)

    def shown(**params: str) -> list[str]:
        html = _body(client.get(reverse("audit:history"), params))
        seqs = _seqs(html)
        found = AuditEvent.objects.filter(seq__in=seqs, action__startswith="test.")
        return sorted(found.values_list("action", flat=True))

    assert shown(since="2026-04-01T10:00") == ["test.a", "test.c", "test.late"]
    assert shown(until="2026-04-01T10:00") == ["test.early", "test.skewed"]
    assert shown(since="2026-04-01T09:30", until="2026-04-01T10:30") == [
        "test.a",
        "test.c",
        "test.skewed",
    ]


@pytest.mark.parametrize(
    "query",
    ["since=0001-01-01T00:00", "until=9999-12-31T23:59", "host=%C2%B2", "host=%D9%A3"],
)
def test_filters_at_the_edges_of_the_calendar_and_unicode_digits_are_not_errors(
    client, viewer, query
):
    client.force_login(viewer)
    assert client.get(f"/audit/?{query}").status_code in {200, 400}
    assert client.get(f"/audit/export.csv?{query}").status_code in {200, 400}
