"""The JSON API with host groups: lists, counts and searches hold only the hosts of the
caller's scope; a host, snapshot, deployment, revision or change outside it answers exactly
what one that does not exist answers; ids in request bodies the same; inside it, an action
needs its role on that host (403 naming both)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from deployments import services
from tests.api.test_audit import body_of

pytestmark = pytest.mark.django_db

API = "/api/v1"


def names(response) -> list[str]:
    assert response.status_code == 200, response.content
    return sorted(
        row["name"] if "name" in row else row["host"] for row in response.json()["results"]
    )


def test_the_host_list_holds_the_scopes_hosts_with_their_groups(api_for, teams, scoped, viewer):
    api = api_for(scoped("ann", "viewer", "team-a"))
    assert names(api.get(f"{API}/hosts/")) == ["gpu-02", "gpu-03"]
    everyone = api_for(viewer)
    assert names(everyone.get(f"{API}/hosts/", {"group": "prod"})) == ["gpu-01", "gpu-02"]
    assert names(api.get(f"{API}/hosts/", {"group": "prod"})) == ["gpu-02"]
    shared = everyone.get(f"{API}/hosts/gpu-02/").json()
    assert shared["groups"] == ["prod", "team-a"]
    bad = everyone.get(f"{API}/hosts/", {"group": "Not A Name"})
    assert bad.status_code == 400 and "group" in bad.json()


@pytest.mark.parametrize(
    "path",
    [
        "/hosts/{name}/",
        "/hosts/{name}/snapshots/",
        "/hosts/{name}/snapshots/latest/",
        "/snapshots/{snapshot}/",
        "/deployments/{deployment}/",
        "/deployments/{deployment}/revisions/",
        "/deployments/{deployment}/revisions/1/evaluations/",
        "/changes/{change}/",
    ],
)
def test_a_row_of_a_host_outside_the_scope_answers_as_one_that_does_not_exist(
    api_for, teams, scoped, operator, path
):
    change = services.change_request_create(
        user=operator, deployment=teams.deployments["gpu-01"], kind="model_swap",
        snapshot=teams.snapshots["gpu-01"], reason="faster", model=teams.catalog["INT4"],
    )  # fmt: skip
    api = api_for(scoped("ann", "operator", "team-a"))
    hidden = {"name": "gpu-01", "snapshot": teams.snapshots["gpu-01"].pk,
              "deployment": teams.deployments["gpu-01"].pk, "change": change.pk}  # fmt: skip
    missing = {"name": "gpu-99", "snapshot": 424242, "deployment": 424242, "change": 424242}
    got, absent = api.get(API + path.format(**hidden)), api.get(API + path.format(**missing))
    assert got.status_code == absent.status_code == 404
    assert got.json() == absent.json()


def test_lists_of_deployments_and_changes_and_their_searches_hold_the_scopes(
    api_for, teams, scoped, operator
):
    for name in ("gpu-01", "gpu-03"):
        services.change_request_create(
            user=operator, deployment=teams.deployments[name], kind="model_swap",
            snapshot=teams.snapshots[name], reason="faster", model=teams.catalog["INT4"],
        )  # fmt: skip
    api = api_for(scoped("ann", "viewer", "team-a"))
    assert names(api.get(f"{API}/deployments/")) == ["gpu-02", "gpu-03"]
    assert names(api.get(f"{API}/deployments/", {"host": "gpu-01"})) == []
    assert names(api.get(f"{API}/changes/")) == ["gpu-03"]
    assert names(api.get(f"{API}/changes/", {"host": "gpu-01"})) == []


def test_a_request_naming_a_row_outside_the_scope_is_refused_as_one_that_does_not_exist(
    api_for, teams, scoped
):
    api = api_for(scoped("ann", "operator", "team-a"))
    body = {"deployment_id": teams.deployments["gpu-01"].pk, "kind": "restart",
            "snapshot_id": teams.snapshots["gpu-01"].pk, "reason": "patch"}  # fmt: skip
    response = api.post(f"{API}/changes/", body, format="json")
    assert response.status_code == 400
    errors = response.json()
    assert errors["deployment_id"] == [f"No deployment with id {body['deployment_id']}."]
    assert errors["snapshot_id"] == [f"No state snapshot with id {body['snapshot_id']}."]


def test_acting_inside_the_scope_needs_the_role_on_the_host(api_for, teams, scoped, operator):
    tess = api_for(scoped("tess", "operator", "team-a", "approver", "team-a", "viewer", "prod"))
    body = {"deployment_id": teams.deployments["gpu-01"].pk, "kind": "restart",
            "snapshot_id": teams.snapshots["gpu-01"].pk, "reason": "patch"}  # fmt: skip
    refused = tess.post(f"{API}/changes/", body, format="json")
    assert refused.status_code == 403
    assert refused.json()["detail"] == "Requesting a change needs the operator role on gpu-01."
    change = services.change_request_create(
        user=operator, deployment=teams.deployments["gpu-01"], kind="model_swap",
        snapshot=teams.snapshots["gpu-01"], reason="faster", model=teams.catalog["INT4"],
    )  # fmt: skip
    approval = {"snapshot_id": teams.snapshots["gpu-01"].pk, "reason": "ok"}
    refused = tess.post(f"{API}/changes/{change.pk}/approve/", approval, format="json")
    assert refused.status_code == 403
    assert refused.json() == {
        "detail": "Approving a change needs the approver role on gpu-01.",
        "code": "forbidden",
        "host": "gpu-01",
        "roles": ["approver"],
    }
    # refused before the body is read: not a 400 for what it lacks
    empty = tess.post(f"{API}/changes/{change.pk}/reject/", {}, format="json")
    assert empty.status_code == 403 and empty.json()["host"] == "gpu-01"
    assert tess.post(f"{API}/changes/{change.pk}/approve/", {}, format="json").status_code == 403
    probe = tess.post(f"{API}/hosts/gpu-01/snapshots/")
    assert probe.status_code == 403 and probe.json()["host"] == "gpu-01"


def test_audit_events_and_exports_leave_out_the_hosts_outside_the_scope(api_for, teams, scoped):
    events = {h: audit.record(action=AuditAction.HOST_KEY_ACCEPTED, target=teams.hosts[h])
              for h in teams.hosts}  # fmt: skip
    audit.record(action=AuditAction.AUTH_LOGIN, actor="someone")  # about no host: stays
    api = api_for(scoped("ann", "viewer", "team-a"))
    listed = api.get(f"{API}/audit/events/", {"action": "host.key_accepted"}).json()["results"]
    assert sorted(e["host_label"] for e in listed) == ["gpu-02", "gpu-03"]
    found = api.get(f"{API}/audit/events/", {"text": "gpu-01"}).json()["results"]
    # (the credential gpu-01-key is about no host: its events stay, as before host groups)
    assert found and {e["host_label"] for e in found} == {""}
    assert api.get(f"{API}/audit/events/{events['gpu-01'].seq}/").status_code == 404
    assert api.get(f"{API}/audit/events/{events['gpu-03'].seq}/").status_code == 200
    jsonl = [json.loads(line) for line in body_of(api.get(f"{API}/audit/export/")).splitlines()]
    assert "gpu-01" not in {e["host_label"] for e in jsonl}
    assert {"gpu-02", "gpu-03", ""} <= {e["host_label"] for e in jsonl}
    exported = api.get(f"{API}/audit/export/", {"format": "csv"})
    assert "gpu-01" not in {r["host_label"] for r in csv.DictReader(io.StringIO(body_of(exported)))}
