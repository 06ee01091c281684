"""Rollouts through the JSON API: the same rules as the pages, every host's state in the
answer, refusals in the API's one shape."""

from __future__ import annotations

import pytest

from deployments.models import Rollout
from deployments.rollouts.choices import RolloutStatus
from tests import factories as f

from .conftest import refusal

pytestmark = pytest.mark.django_db


@pytest.fixture
def hosts(catalog):
    found = []
    for i in (1, 2, 3):
        host = f.make_host(f"gpu-0{i}", port=2200 + i)
        f.make_deployment(host, catalog["NVFP4"])
        f.make_snapshot(host, age=1)
        found.append(host)
    return found


def request_body(catalog, **overrides):
    return {
        "kind": "model_swap", "model_id": catalog["INT4"].pk,
        "hosts": ["gpu-01", "gpu-02", "gpu-03"], "wave_size": 50, "wave_unit": "percent",
        "max_down": 2, "reason": "INT4 serves more tokens per second", **overrides,
    }  # fmt: skip


def test_request_read_and_approve(api_for, operator, approver, hosts, catalog) -> None:
    created = api_for(operator).post("/api/v1/rollouts/", request_body(catalog), format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert created["Location"] == f"/api/v1/rollouts/{body['id']}/"
    assert body["status"] == "pending_approval" and body["waves"] == 2
    assert [(h["host"], h["wave"], h["status"]) for h in body["hosts"]] == [
        ("gpu-01", 0, "pending"), ("gpu-02", 1, "pending"), ("gpu-03", 1, "pending"),
    ]  # 50 % of 3 hosts is 2 per wave, after the canary  # fmt: skip
    assert body["link"] == f"/rollouts/{body['id']}/"
    own = api_for(operator).post(f"/api/v1/rollouts/{body['id']}/approve/", {"reason": "mine"})
    assert own.status_code == 403 and refusal(own)["code"] == "forbidden"
    approved = api_for(approver).post(
        f"/api/v1/rollouts/{body['id']}/approve/", {"reason": "the canary will tell"}
    )
    assert approved.status_code == 200, approved.json()
    answer = approved.json()
    assert answer["status"] == "approved" and answer["approval"]["approver"] == "anna"
    assert answer["hosts"][0]["approved"]["models"] == ["kimi-k2.5"]
    listed = api_for(operator).get("/api/v1/rollouts/").json()
    assert [r["id"] for r in listed["results"]] == [body["id"]]


def test_bad_input_is_a_400_in_words(api_for, operator, hosts, catalog) -> None:
    client = api_for(operator)
    unknown = client.post(
        "/api/v1/rollouts/", request_body(catalog, hosts=["gpu-09"]), format="json"
    )
    assert unknown.status_code == 400 and unknown.json()["hosts"] == ["No such host: gpu-09."]
    wrong = client.post("/api/v1/rollouts/", request_body(catalog, kind="stop"), format="json")
    assert wrong.status_code == 400 and "kind" in wrong.json()
    zero = client.post("/api/v1/rollouts/", request_body(catalog, max_down=0), format="json")
    assert zero.status_code == 400 and "max_down" in zero.json()
    refused = client.post("/api/v1/rollouts/", request_body(catalog, model_id=None), format="json")
    assert refused.status_code == 400 and "needs the model" in refusal(refused)["detail"]
    assert not Rollout.objects.exists()


def test_a_viewer_may_read_but_not_request(api_for, viewer, hosts, catalog) -> None:
    client = api_for(viewer)
    assert client.get("/api/v1/rollouts/").status_code == 200
    refused = client.post("/api/v1/rollouts/", request_body(catalog), format="json")
    assert refused.status_code == 403


def test_abort_needs_a_reason(api_for, operator, hosts, catalog) -> None:
    client = api_for(operator)
    made = client.post("/api/v1/rollouts/", request_body(catalog), format="json").json()
    bare = client.post(f"/api/v1/rollouts/{made['id']}/abort/", {}, format="json")
    assert bare.status_code == 400 and "reason" in refusal(bare)["detail"]
    done = client.post(
        f"/api/v1/rollouts/{made['id']}/abort/", {"reason": "not today"}, format="json"
    )
    assert done.status_code == 200 and done.json()["status"] == RolloutStatus.ABORTED
    again = client.post(f"/api/v1/rollouts/{made['id']}/pause/", {}, format="json")
    assert again.status_code == 409 and refusal(again)["code"] == "conflict"
    assert client.get("/api/v1/rollouts/99999/").status_code == 404


def test_the_list_filters_by_status(api_for, operator, hosts, catalog) -> None:
    client = api_for(operator)
    aborted = client.post("/api/v1/rollouts/", request_body(catalog), format="json").json()
    client.post(f"/api/v1/rollouts/{aborted['id']}/abort/", {"reason": "wrong build"})
    waiting = client.post("/api/v1/rollouts/", request_body(catalog), format="json").json()

    def listed(status: str) -> list[int]:
        answer = client.get("/api/v1/rollouts/", {"status": status})
        assert answer.status_code == 200, answer.json()
        return [r["id"] for r in answer.json()["results"]]

    assert listed("pending_approval") == [waiting["id"]]
    assert listed("aborted") == [aborted["id"]]
    assert listed("running") == []
    unknown = client.get("/api/v1/rollouts/", {"status": "done"})
    assert unknown.status_code == 400 and "status" in unknown.json()
