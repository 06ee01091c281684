"""The audit log through the API: the history page's filters, keyset pages on seq, one event,
and streaming exports in JSON Lines and CSV."""

from __future__ import annotations

import csv
import hashlib
import io
import json

import pytest

from controlplane.audit import services as audit
from controlplane.audit.chain import GENESIS_HASH, canonical_json
from controlplane.audit.models import AuditEvent
from tests import factories as f

pytestmark = pytest.mark.django_db

EVENTS = "/api/v1/audit/events/"
EXPORT = "/api/v1/audit/export/"


def body_of(response) -> str:
    return b"".join(response.streaming_content).decode()


def record(n: int, action: str = "test.event", **fields):
    return [audit.record(action=action, actor=fields.get("actor", "system:test"),
                         host=fields.get("host"), data={"i": i}) for i in range(n)]  # fmt: skip


@pytest.mark.parametrize("path", [EVENTS, f"{EVENTS}1/", EXPORT])
def test_it_needs_credentials_and_a_role(api_for, outsider, path):
    record(1)
    response = api_for(None).get(path)
    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    response = api_for(outsider).get(path)
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"


def test_events_newest_first_in_keyset_pages(api_for, viewer):
    events = record(7)
    client = api_for(viewer)
    first = client.get(EVENTS, {"action": "test.event", "page_size": 3}).json()
    assert [e["seq"] for e in first["results"]] == [e.seq for e in events[:-4:-1]]
    assert first["previous"] is None
    assert f"before={events[4].seq}" in first["next"]
    assert "action=test.event" in first["next"]
    second = client.get(first["next"]).json()
    assert [e["seq"] for e in second["results"]] == [e.seq for e in events[3:0:-1]]
    assert f"after={events[3].seq}" in second["previous"]
    back = client.get(second["previous"]).json()
    assert [e["seq"] for e in back["results"]] == [e.seq for e in events[:-4:-1]]
    last = client.get(second["next"]).json()
    assert [e["seq"] for e in last["results"]] == [events[0].seq]
    assert last["next"] is None


def test_the_history_pages_filters(api_for, viewer, operator):
    host = f.make_host("gpu-07")
    record(2, "change.requested", actor="otto", host=host)
    record(1, "change.approved", actor="anna")
    record(1, "probe.completed", host=host)
    client = api_for(viewer)

    def actions(**params):
        return [e["action"] for e in client.get(EVENTS, params).json()["results"]]

    assert actions(action="change.") == ["change.approved", "change.requested", "change.requested"]
    assert actions(action="change.requested", actor="otto") == ["change.requested"] * 2
    assert set(actions(host="gpu-07")) >= {"probe.completed", "change.requested"}
    assert "probe.completed" in actions(host=str(host.pk))
    assert actions(text="anna") == ["change.approved"]
    assert actions(action="nothing.like.this") == []


def test_one_event_with_its_hashes(api_for, viewer):
    [event] = record(1)
    body = api_for(viewer).get(f"{EVENTS}{event.seq}/").json()
    assert body["seq"] == event.seq
    assert body["hash"] == event.hash
    assert body["prev_hash"] == event.prev_hash
    assert body["data"] == {"i": 0}
    assert api_for(viewer).get(f"{EVENTS}{event.seq + 100}/").status_code == 404


@pytest.mark.parametrize(
    "params, field",
    [
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-02-01T00:00", "until": "2026-01-01T00:00"}, "non_field_errors"),
        ({"since": "0001-01-01"}, "since"),
        ({"until": "9999-12-31T23:59"}, "until"),
        ({"host": "²"}, "host"),
        ({"host": "gpu 01; drop"}, "host"),
        ({"actor": "a\x00b"}, "actor"),
        ({"correlation": "c" * 65}, "correlation"),
        ({"before": "x"}, "before"),
        ({"before": "5", "after": "3"}, "non_field_errors"),
        ({"page_size": "0"}, "page_size"),
        ({"page_size": "1000"}, "page_size"),
    ],
)
def test_bad_filters_are_a_400(api_for, viewer, params, field):
    record(1)
    client = api_for(viewer)
    paging = {"before", "after", "page_size"} & set(params)
    for path in (EVENTS,) if paging else (EVENTS, EXPORT):
        response = client.get(path, params)
        assert response.status_code == 400, (path, response.content)
        assert field in response.json()


def test_a_jsonl_export_streams_and_verifies_offline(api_for, viewer):
    record(12)
    response = api_for(viewer).get(EXPORT)  # JSON Lines unless asked otherwise
    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"] == "application/x-ndjson; charset=utf-8"
    assert response["Content-Disposition"].endswith('.jsonl"')
    assert response["Cache-Control"] == "no-store"
    lines = body_of(response).splitlines()
    assert len(lines) == AuditEvent.objects.count()
    previous = GENESIS_HASH
    for line in lines:
        event = json.loads(line)
        claimed = event.pop("hash")
        assert hashlib.sha256(canonical_json(event).encode()).hexdigest() == claimed
        assert event["prev_hash"] == previous
        previous = claimed


def test_a_csv_export_of_the_filtered_events(api_for, viewer):
    record(3, "test.keep")
    record(2, "test.drop")
    response = api_for(viewer).get(EXPORT, {"format": "csv", "action": "test.keep"})
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    rows = list(csv.DictReader(io.StringIO(body_of(response))))
    assert [r["action"] for r in rows] == ["test.keep"] * 3
    assert [json.loads(r["data"]) for r in rows] == [{"i": 0}, {"i": 1}, {"i": 2}]


def test_the_export_format_can_be_negotiated_too(api_for, viewer):
    record(1)
    response = api_for(viewer).get(EXPORT, HTTP_ACCEPT="text/csv")
    assert response["Content-Type"].startswith("text/csv")


def test_an_unknown_export_format_is_a_400(api_for, viewer):
    response = api_for(viewer).get(EXPORT, {"format": "xlsx"})
    assert response.status_code == 400
    assert response.json() == {"format": ["Unknown format."]}


def test_reading_the_log_writes_nothing_to_it(api_for, viewer):
    record(2)
    client = api_for(viewer)
    before = AuditEvent.objects.count()
    client.get(EVENTS)
    body_of(client.get(EXPORT))
    assert AuditEvent.objects.count() == before
