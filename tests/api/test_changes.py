"""Change requests through the API: every persona, every refusal, and the statuses they map to.

The rules are deployments.services'; these tests check that the API reaches them with the
caller as actor and answers each refusal the way the issue asks (stale: 409 with the age and
the limit; refused approval: 403 with the reason; conflicts: 409; bad input: 400).
"""

from __future__ import annotations

import base64
import json

import pytest
from django.utils import timezone

from controlplane.audit.models import AuditEvent
from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest, JobStep
from tests import factories as f

from .conftest import refusal

pytestmark = pytest.mark.django_db

CHANGES = "/api/v1/changes/"


def create(client, deployment, snapshot, kind="restart", **extra):
    body = {
        "deployment_id": deployment.pk,
        "kind": kind,
        "snapshot_id": snapshot.pk,
        "reason": "apply the patched engine",
        **extra,
    }
    return client.post(CHANGES, body, format="json")


def action(change, name):
    return f"{CHANGES}{change.pk}/{name}/"


@pytest.fixture
def swap(api_for, operator, deployment, catalog):
    """A model swap to INT4 requested by the operator, waiting for approval."""
    snapshot = f.make_snapshot(deployment.host)
    response = create(
        api_for(operator), deployment, snapshot, kind="model_swap", model_id=catalog["INT4"].pk
    )
    assert response.status_code == 201, response.content
    change = ChangeRequest.objects.get(pk=response.json()["id"])
    assert change.status == ChangeStatus.PENDING_APPROVAL
    return change


# --- who may do what ---------------------------------------------------------------------------


def test_everything_needs_credentials(api_for, swap):
    client = api_for(None)
    assert client.get(CHANGES).status_code == 401
    assert client.get(f"{CHANGES}{swap.pk}/").status_code == 401
    assert create(client, swap.deployment, swap.snapshot).status_code == 401
    for name in ("approve", "reject", "break-glass", "cancel"):
        assert client.post(action(swap, name), {}, format="json").status_code == 401


def test_users_without_a_role_get_403_on_everything(api_for, outsider, swap):
    client = api_for(outsider)
    assert client.get(CHANGES).status_code == 403
    assert client.get(f"{CHANGES}{swap.pk}/").status_code == 403
    assert create(client, swap.deployment, swap.snapshot).status_code == 403
    for name in ("approve", "reject", "break-glass", "cancel"):
        assert client.post(action(swap, name), {}, format="json").status_code == 403
    swap.refresh_from_db()
    assert swap.status == ChangeStatus.PENDING_APPROVAL


@pytest.mark.parametrize("persona", ["viewer", "approver"])
def test_only_operators_request_changes(request, api_for, deployment, persona):
    snapshot = f.make_snapshot(deployment.host)
    response = create(api_for(request.getfixturevalue(persona)), deployment, snapshot)
    assert response.status_code == 403
    assert refusal(response)["detail"] == "This needs the operator role."
    assert not ChangeRequest.objects.exists()


# --- requesting ---------------------------------------------------------------------------------


def test_an_operator_requests_a_restart_on_a_fresh_snapshot(api_for, operator, deployment):
    snapshot = f.make_snapshot(deployment.host, age=12)
    response = create(api_for(operator), deployment, snapshot)
    assert response.status_code == 201, response.content
    body = response.json()
    assert response["Location"] == f"{CHANGES}{body['id']}/"
    assert body["status"] == "queued"
    assert body["kind"] == "restart"
    assert body["host"] == "gpu-01"
    assert body["snapshot_id"] == snapshot.pk
    assert body["requested_by"] == operator.username
    assert body["needs_approval"] is False
    assert body["from_revision"]["number"] == 1
    event = AuditEvent.objects.get(action="change.requested")
    assert event.actor == operator.username
    assert event.actor_user_id == operator.pk
    assert event.snapshot_id == snapshot.pk
    assert event.target_id == str(body["id"])


def test_a_model_swap_waits_for_approval(swap):
    assert swap.needs_approval
    assert swap.target_revision.model.variant == "INT4"


def test_a_stale_snapshot_is_a_409_with_its_age_and_the_limit(api_for, operator, deployment):
    snapshot = f.make_snapshot(deployment.host, age=900)
    response = create(api_for(operator), deployment, snapshot)
    assert response.status_code == 409
    body = refusal(response)
    assert body["code"] == "stale"
    assert 899 < body["snapshot_age_seconds"] < 910
    assert body["limit_seconds"] == 300
    assert "the limit is 300 s" in body["detail"]
    assert not ChangeRequest.objects.exists()


def test_the_limit_is_the_setting(api_for, operator, deployment, settings):
    settings.SNAPSHOT_MAX_AGE_SECONDS = 30
    response = create(api_for(operator), deployment, f.make_snapshot(deployment.host, age=60))
    assert response.status_code == 409
    assert refusal(response)["limit_seconds"] == 30


def test_another_hosts_snapshot_is_refused(api_for, operator, deployment):
    elsewhere = f.make_snapshot(f.make_host("gpu-02"))
    response = create(api_for(operator), deployment, elsewhere)
    assert response.status_code == 409
    body = refusal(response)
    assert body["code"] == "stale"
    assert body["detail"] == f"snapshot #{elsewhere.pk} is of gpu-02, not gpu-01"


def test_a_snapshot_that_is_not_ok_is_refused(api_for, operator, deployment):
    snapshot = f.make_snapshot(deployment.host, status="unreachable")
    response = create(api_for(operator), deployment, snapshot)
    assert response.status_code == 409
    assert "has status unreachable" in refusal(response)["detail"]


def test_a_superseded_snapshot_is_refused(api_for, operator, deployment):
    older = f.make_snapshot(deployment.host, age=60)
    f.make_snapshot(deployment.host, age=5, parsed=f.parsed_state(main_pid=5150))
    response = create(api_for(operator), deployment, older)
    assert response.status_code == 409
    assert "is superseded" in refusal(response)["detail"]


def test_a_model_that_cannot_fit_is_a_409(api_for, operator, deployment, catalog):
    snapshot = f.make_snapshot(deployment.host)
    response = create(
        api_for(operator), deployment, snapshot, kind="model_swap", model_id=catalog["FP8"].pk
    )
    assert response.status_code == 409
    body = refusal(response)
    assert body["code"] == "conflict"
    assert "does not fit" in body["detail"]
    assert not ChangeRequest.objects.exists()


def test_a_second_job_on_the_same_host_is_a_409(api_for, operator, deployment):
    client = api_for(operator)
    snapshot = f.make_snapshot(deployment.host)
    first = create(client, deployment, snapshot)
    assert first.json()["status"] == "queued"
    second = create(client, deployment, snapshot, kind="stop")
    assert second.status_code == 409
    body = refusal(second)
    assert body["code"] == "conflict"
    assert f"change #{first.json()['id']} is queued on gpu-01" in body["detail"]
    assert ChangeRequest.objects.count() == 1


def test_requests_in_flight_need_an_explicit_acknowledgement(api_for, operator, deployment):
    client = api_for(operator)
    snapshot = f.make_snapshot(deployment.host, parsed=f.parsed_state(running=3))
    response = create(client, deployment, snapshot)
    assert response.status_code == 409
    body = refusal(response)
    assert body["needs_acknowledgement"] is True
    assert "3 requests in flight" in body["detail"]
    response = create(client, deployment, snapshot, acknowledge_busy=True)
    assert response.status_code == 201
    assert response.json()["busy_acknowledged"] is True


def test_a_rollback_without_an_earlier_revision_is_a_400(api_for, operator, deployment):
    response = create(api_for(operator), deployment, f.make_snapshot(deployment.host), "rollback")
    assert response.status_code == 400
    assert refusal(response) == {
        "detail": "there is no earlier revision to roll back to",
        "code": "invalid",
    }


def test_a_redeploy_with_new_engine_arguments(api_for, operator, deployment):
    standard = f.default_benchmark_profile()
    response = create(
        api_for(operator),
        deployment,
        f.make_snapshot(deployment.host),
        "redeploy",
        extra_args=["--enforce-eager", "--gpu-memory-utilization=0.95"],
        max_model_len=131072,
        benchmark=True,
    )
    assert response.status_code == 201, response.content
    target = response.json()["target_revision"]
    assert target["extra_args"] == ["--enforce-eager", "--gpu-memory-utilization=0.95"]
    assert target["max_model_len"] == 131072
    assert "--enforce-eager" in target["unit_text"]
    # A longer context and a new memory share change what serves: a second person decides.
    # `benchmark: true` picks the default profile, frozen into the change as it is now.
    assert response.json()["params"] == {
        "benchmark": standard.definition(),
        "approval_because": [
            "max model length: 262144 → 131072 (changes the memory needed and what serves)",
            "GPU memory share: unset → 0.95 (changes the memory needed)",
        ],
    }
    assert response.json()["status"] == "pending_approval"


BAD_INPUT = {
    "no body at all": ({}, {"deployment_id", "kind", "snapshot_id", "reason"}),
    "unknown kind": ({"kind": "reboot"}, {"kind"}),
    "id as text": ({"deployment_id": "one"}, {"deployment_id"}),
    "id as a boolean": ({"deployment_id": True}, {"deployment_id"}),
    "id as a fraction": ({"snapshot_id": 1.5}, {"snapshot_id"}),
    "id out of range": ({"snapshot_id": 2**70}, {"snapshot_id"}),
    "negative id": ({"deployment_id": -4}, {"deployment_id"}),
    "no such deployment": ({"deployment_id": 987654}, {"deployment_id"}),
    "no such snapshot": ({"snapshot_id": 987654}, {"snapshot_id"}),
    "no such model": ({"kind": "model_swap", "model_id": 987654}, {"model_id"}),
    "blank reason": ({"reason": "   "}, {"reason"}),
    "NUL in the reason": ({"reason": "a\x00b"}, {"reason"}),
    "overlong reason": ({"reason": "x" * 2001}, {"reason"}),
    "swap without a model": ({"kind": "model_swap"}, {"model_id"}),
    "model for a restart": ({"model_id": "CATALOG"}, {"model_id"}),
    "arguments for a restart": ({"extra_args": ["--enforce-eager"]}, {"extra_args"}),
    "hostile arguments": (
        {"kind": "redeploy", "extra_args": ["--x=$(reboot)"]},
        {"extra_args"},
    ),
    "arguments as a string": ({"kind": "redeploy", "extra_args": "--a --b"}, {"extra_args"}),
    "tensor parallel of zero": (
        {"kind": "redeploy", "tensor_parallel_size": 0},
        {"tensor_parallel_size"},
    ),
    "flag as text": ({"acknowledge_busy": "perhaps"}, {"acknowledge_busy"}),
}


@pytest.mark.parametrize("case", list(BAD_INPUT), ids=list(BAD_INPUT))
def test_bad_input_is_a_400_with_field_errors(api_for, operator, deployment, catalog, case):
    fields, expected = BAD_INPUT[case]
    if fields.get("model_id") == "CATALOG":
        fields = {**fields, "model_id": catalog["INT4"].pk}
    snapshot = f.make_snapshot(deployment.host)
    valid = {
        "deployment_id": deployment.pk,
        "kind": "restart",
        "snapshot_id": snapshot.pk,
        "reason": "because",
    }
    body = {} if case == "no body at all" else {**valid, **fields}
    response = api_for(operator).post(CHANGES, body, format="json")
    assert response.status_code == 400, response.content
    assert set(response.json()) == expected
    assert not ChangeRequest.objects.exists()


@pytest.mark.parametrize(
    "raw, content_type",
    [
        ("{not json", "application/json"),
        ("[1, 2]", "application/json"),
        ("null", "application/json"),
        ('"text"', "application/json"),
        ("[" * 100_000 + "]" * 100_000, "application/json"),
        ('{"a": ' * 50_000 + "1" + "}" * 50_000, "application/json"),
        ('{"deployment_id": NaN}', "application/json"),
        ("kind=restart", "application/x-www-form-urlencoded"),
    ],
)
def test_bad_json_is_a_400_or_415(api_for, operator, deployment, raw, content_type):
    response = api_for(operator).generic("POST", CHANGES, raw, content_type=content_type)
    assert response.status_code == (400 if content_type == "application/json" else 415)
    assert "detail" in response.json() or "non_field_errors" in response.json()


# --- deciding -----------------------------------------------------------------------------------


def test_an_approver_approves_on_the_snapshot_reviewed(api_for, approver, swap):
    reviewed = f.make_snapshot(swap.host, age=2)
    response = api_for(approver).post(
        action(swap, "approve"), {"snapshot_id": reviewed.pk, "reason": "fits"}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "queued"
    [approval] = body["approvals"]
    assert approval["approver"] == approver.username
    assert approval["decision"] == "approved"
    assert approval["snapshot_id"] == reviewed.pk
    assert approval["reason"] == "fits"
    assert approval["expires_at"] == swap.approvals.get().expires_at.isoformat().replace(
        "+00:00", "Z"
    )
    event = AuditEvent.objects.get(action="change.approved")
    assert event.actor == approver.username
    assert event.snapshot_id == reviewed.pk


def test_approving_your_own_request_is_a_403_with_the_reason(
    api_for, admin_user, deployment, catalog
):
    client = api_for(admin_user)  # an administrator holds every role, and still needs a second
    snapshot = f.make_snapshot(deployment.host)
    created = create(client, deployment, snapshot, "model_swap", model_id=catalog["INT4"].pk)
    change_id = created.json()["id"]
    response = client.post(
        f"{CHANGES}{change_id}/approve/",
        {"snapshot_id": snapshot.pk, "reason": "fits"},
        format="json",
    )
    assert response.status_code == 403
    assert refusal(response) == {
        "detail": "the two-person rule: you cannot approve your own request",
        "code": "forbidden",
    }
    assert ChangeRequest.objects.get(pk=change_id).status == ChangeStatus.PENDING_APPROVAL


@pytest.mark.parametrize("persona", ["viewer", "operator"])
def test_only_approvers_approve(request, api_for, swap, persona):
    client = api_for(request.getfixturevalue(persona))
    response = client.post(
        action(swap, "approve"), {"snapshot_id": swap.snapshot_id, "reason": "fits"}
    )
    assert response.status_code == 403
    assert refusal(response) == {
        "detail": "Approving a change needs the approver role",
        "code": "forbidden",
    }


def test_approving_on_a_stale_snapshot_is_a_409(api_for, approver, swap):
    old = f.make_snapshot(swap.host, age=400)
    response = api_for(approver).post(
        action(swap, "approve"), {"snapshot_id": old.pk, "reason": "fits"}
    )
    assert response.status_code == 409
    body = refusal(response)
    assert body["code"] == "stale"
    assert body["limit_seconds"] == 300
    assert body["snapshot_age_seconds"] > 399


def test_approving_on_a_changed_host_marks_the_change_drifted(api_for, approver, swap):
    changed = f.make_snapshot(swap.host, parsed=f.parsed_state(main_pid=777))
    response = api_for(approver).post(
        action(swap, "approve"), {"snapshot_id": changed.pk, "reason": "fits"}
    )
    assert response.status_code == 409
    body = refusal(response)
    assert body["code"] == "drifted"
    assert body["change"]["status"] == "drifted"
    assert any("main_pid" in d["field"] for d in body["change"]["drift_report"]), body
    assert AuditEvent.objects.filter(action="change.drifted", actor=approver.username).exists()


def test_approving_twice_is_a_409(api_for, approver, swap):
    client = api_for(approver)
    reviewed = f.make_snapshot(swap.host)
    assert (
        client.post(
            action(swap, "approve"), {"snapshot_id": reviewed.pk, "reason": "fits"}
        ).status_code
        == 200
    )
    again = client.post(action(swap, "approve"), {"snapshot_id": reviewed.pk, "reason": "fits"})
    assert again.status_code == 409
    assert refusal(again)["code"] == "conflict"


def test_approving_needs_a_snapshot(api_for, approver, swap):
    response = api_for(approver).post(action(swap, "approve"), {"reason": "ok"}, format="json")
    assert response.status_code == 400
    assert set(response.json()) == {"snapshot_id"}


def test_deciding_on_a_missing_change_is_a_404(api_for, approver, admin_user):
    for name in ("approve", "reject", "cancel"):
        response = api_for(approver).post(f"{CHANGES}424242/{name}/", {}, format="json")
        assert response.status_code == 404
    response = api_for(admin_user).post(f"{CHANGES}424242/break-glass/", {}, format="json")
    assert response.status_code == 404


def test_an_approver_rejects_with_a_reason(api_for, approver, operator, swap):
    client = api_for(approver)
    assert client.post(action(swap, "reject"), {}, format="json").status_code == 400
    response = api_for(operator).post(action(swap, "reject"), {"reason": "no"}, format="json")
    assert response.status_code == 403
    response = client.post(action(swap, "reject"), {"reason": "not this week"}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "rejected"
    assert body["approvals"][0]["decision"] == "rejected"
    assert body["approvals"][0]["expires_at"] is None  # a rejection never expires
    assert AuditEvent.objects.get(action="change.rejected").actor == approver.username


def test_break_glass_is_for_administrators(api_for, approver, admin_user, swap):
    reviewed = f.make_snapshot(swap.host)
    response = api_for(approver).post(
        action(swap, "break-glass"),
        {"snapshot_id": reviewed.pk, "reason": "the pager is on fire"},
        format="json",
    )
    assert response.status_code == 403
    assert refusal(response)["detail"] == "break-glass needs an administrator"
    client = api_for(admin_user)
    short = client.post(action(swap, "break-glass"), {"snapshot_id": reviewed.pk, "reason": "x"})
    assert short.status_code == 400
    assert refusal(short)["code"] == "invalid"
    response = client.post(
        action(swap, "break-glass"),
        {"snapshot_id": reviewed.pk, "reason": "the pager is on fire"},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "queued"
    assert response.json()["approvals"][0]["decision"] == "break_glass"
    event = AuditEvent.objects.get(action="change.break_glass")
    assert event.actor == admin_user.username
    assert event.data["alert"] is True


def test_break_glass_on_a_stale_snapshot_is_a_409(api_for, admin_user, swap):
    old = f.make_snapshot(swap.host, age=1000)
    response = api_for(admin_user).post(
        action(swap, "break-glass"), {"snapshot_id": old.pk, "reason": "the pager is on fire"}
    )
    assert response.status_code == 409
    assert refusal(response)["code"] == "stale"


def test_the_requester_cancels(api_for, operator, viewer, approver, swap):
    assert api_for(viewer).post(action(swap, "cancel")).status_code == 403
    assert api_for(approver).post(action(swap, "cancel")).status_code == 403
    response = api_for(operator).post(action(swap, "cancel"))
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    again = api_for(operator).post(action(swap, "cancel"))
    assert again.status_code == 409
    assert "already finished" in refusal(again)["detail"]
    assert AuditEvent.objects.get(action="change.cancelled").actor == operator.username


# --- reading ------------------------------------------------------------------------------------


def test_one_change_with_its_steps_and_approvals(api_for, viewer, approver, swap):
    api_for(approver).post(
        action(swap, "approve"), {"snapshot_id": swap.snapshot_id, "reason": "fits"}
    )
    now = timezone.now()
    JobStep.objects.create(
        change=swap, seq=1, name="lease", status="succeeded", started_at=now, finished_at=now
    )
    JobStep.objects.create(
        change=swap, seq=2, name="re-probe and compare", status="running", started_at=now
    )
    body = api_for(viewer).get(f"{CHANGES}{swap.pk}/").json()
    assert body["status"] == "queued"
    assert [s["name"] for s in body["steps"]] == ["lease", "re-probe and compare"]
    assert body["steps"][1]["finished_at"] is None
    assert body["approvals"][0]["approver"] == approver.username
    assert body["drift_report"] == []
    assert body["before_snapshot_id"] is None
    assert body["after_snapshot_id"] is None
    assert body["target_revision"]["model"]["variant"] == "INT4"
    assert api_for(viewer).get(f"{CHANGES}{swap.pk + 1}/").status_code == 404


def test_the_list_filters_by_status_and_host(api_for, viewer, operator, swap, catalog):
    other = f.make_deployment(f.make_host("gpu-02"), catalog["NVFP4"])
    restart = create(api_for(operator), other, f.make_snapshot(other.host)).json()
    client = api_for(viewer)
    everything = client.get(CHANGES).json()["results"]
    assert [c["id"] for c in everything] == [restart["id"], swap.pk]
    waiting = client.get(CHANGES, {"status": "pending_approval"}).json()["results"]
    assert [c["id"] for c in waiting] == [swap.pk]
    on_gpu_02 = client.get(CHANGES, {"host": "gpu-02"}).json()["results"]
    assert [c["id"] for c in on_gpu_02] == [restart["id"]]
    response = client.get(CHANGES, {"status": "exploded"})
    assert response.status_code == 400
    assert set(response.json()) == {"status"}


def test_the_list_pages_by_cursor_and_refuses_forged_cursors(api_for, viewer, swap):
    client = api_for(viewer)
    assert client.get(CHANGES, {"page_size": 1}).json()["next"] is None
    for position in ("abc", "99999999999999999999999", "1.5"):
        forged = base64.b64encode(f"p={position}".encode()).decode()
        response = client.get(CHANGES, {"cursor": forged})
        assert response.status_code == 400, position
        assert json.loads(response.content)["cursor"] == ["Invalid cursor"]
