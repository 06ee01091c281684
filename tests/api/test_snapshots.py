"""Snapshots: list, get, latest, and "probe now" through the API, synchronously over real SSH
to the simulator or queued for a real worker."""

from __future__ import annotations

import time

import pytest
from kombu.exceptions import OperationalError

from controlplane.audit.models import AuditEvent
from hosts import dispatch
from hosts.models import StateSnapshot
from tests import factories as f
from tests.fleet import register

pytestmark = pytest.mark.django_db


def url(name: str = "gpu-01", rest: str = "") -> str:
    return f"/api/v1/hosts/{name}/snapshots/{rest}"


@pytest.fixture
def host():
    return f.make_host("gpu-01")


def test_reads_need_credentials_and_a_role(api_for, outsider, host):
    snapshot = f.make_snapshot(host)
    for path in (url(), url(rest="latest/"), f"/api/v1/snapshots/{snapshot.pk}/"):
        assert api_for(None).get(path).status_code == 401
        assert api_for(outsider).get(path).status_code == 403


def test_a_hosts_snapshots_newest_first_by_cursor(api_for, viewer, host):
    old = f.make_snapshot(host, age=600)
    new = f.make_snapshot(host, age=5)
    mid = f.make_snapshot(host, age=60)
    f.make_snapshot(f.make_host("gpu-02"))
    client = api_for(viewer)
    first = client.get(url(), {"page_size": 2}).json()
    assert [s["id"] for s in first["results"]] == [new.pk, mid.pk]
    second = client.get(first["next"]).json()
    assert [s["id"] for s in second["results"]] == [old.pk]
    assert second["next"] is None
    item = first["results"][0]
    assert item["host"] == "gpu-01"
    assert item["status"] == "ok"
    assert item["digest"] == new.digest
    assert item["material_fingerprint"] == new.material_fingerprint()
    assert item["parsed"]["gpus"][0]["memory_total_mib"] == 97887


def test_the_latest_snapshot(api_for, viewer, host):
    client = api_for(viewer)
    assert client.get(url(rest="latest/")).status_code == 404
    f.make_snapshot(host, age=30)
    newest = f.make_snapshot(host, age=3)
    body = client.get(url(rest="latest/")).json()
    assert body["id"] == newest.pk
    assert 2 < body["age_seconds"] < 10


def test_one_snapshot_with_its_raw_output(api_for, viewer, host):
    snapshot = f.make_snapshot(host)
    client = api_for(viewer)
    body = client.get(f"/api/v1/snapshots/{snapshot.pk}/").json()
    assert body["id"] == snapshot.pk
    assert body["raw"] == {}
    assert client.get(f"/api/v1/snapshots/{snapshot.pk + 1000}/").status_code == 404
    assert client.get(f"/api/v1/snapshots/{2**64}/").status_code == 404


def test_an_unknown_host_is_a_404(api_for, viewer, operator):
    assert api_for(viewer).get(url("gpu-77")).status_code == 404
    assert api_for(operator).post(url("gpu-77")).status_code == 404


def test_probing_needs_the_operator_or_approver_role(api_for, viewer, outsider, host):
    assert api_for(None).post(url()).status_code == 401
    for user in (viewer, outsider):
        response = api_for(user).post(url())
        assert response.status_code == 403
        assert response.json()["detail"] == "This needs the operator or approver role."
    assert not StateSnapshot.objects.exists()


def test_a_bad_flag_is_a_400(api_for, operator, host):
    response = api_for(operator).post(url() + "?async=maybe")
    assert response.status_code == 400
    assert "async" in response.json()


def test_queueing_when_the_broker_is_down_is_a_503(api_for, operator, host, monkeypatch):
    def down(*args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(dispatch, "send", down)
    response = api_for(operator).post(url() + "?async=1")
    assert response.status_code == 503
    assert response.json()["code"] == "queue_unavailable"


@pytest.mark.integration
def test_probe_now_takes_a_snapshot_of_a_simulated_host(api_for, operator, registered_fleet):
    response = api_for(operator).post(url())
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "ok", body["error"]
    assert body["trigger"] == "manual"
    assert body["parsed"]["deployments"]["vllm-kimi-k25.service"]["server"]["models"] == [
        "kimi-k2.5"
    ]
    assert len(body["parsed"]["gpus"]) == 8
    assert response["Location"] == f"/api/v1/snapshots/{body['id']}/"
    # The audit middleware saw an anonymous request; the event names the token's owner.
    event = AuditEvent.objects.get(action="probe.completed", snapshot_id=body["id"])
    assert event.actor == operator.username
    assert event.actor_user_id == operator.pk


@pytest.mark.integration
def test_an_approver_probes_before_approving(api_for, approver, registered_fleet):
    response = api_for(approver).post(url("gpu-02"))
    assert response.status_code == 201
    assert response.json()["host"] == "gpu-02"


@pytest.mark.integration
def test_probe_now_queued_for_a_real_worker(api_for, operator, make_fleet, celery_worker):
    fleet = register(make_fleet(1))
    host = fleet.host("gpu-01")
    response = api_for(operator).post(url() + "?async=1")
    assert response.status_code == 202
    assert response.json()["latest"] == url(rest="latest/")
    deadline = time.monotonic() + 30
    while not StateSnapshot.objects.filter(host=host).exists():
        assert time.monotonic() < deadline, celery_worker.output()
        time.sleep(0.1)
    snapshot = StateSnapshot.objects.get(host=host)
    assert snapshot.status == "ok", snapshot.error
    event = AuditEvent.objects.get(action="probe.completed", snapshot_id=snapshot.pk)
    assert event.actor == operator.username
