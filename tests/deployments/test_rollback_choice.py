"""A rollback may go back to any revision the deployment served, not only one back, with the
approval what it serves needs; a revision it may not go back to is refused in words, on the
form and in the API alike. (The jobs themselves: test_rollback_jobs.py.)"""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from controlplane.api import services as token_services
from controlplane.audit.models import AuditEvent
from deployments import kinds, revisions, services
from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest, Deployment, DeploymentRevision
from tests import factories as f

pytestmark = pytest.mark.django_db


def request(operator, deployment, kind: str, **kwargs) -> ChangeRequest:
    return services.change_request_create(
        user=operator, deployment=deployment, kind=kind,
        snapshot=f.make_snapshot(deployment.host), reason="compare the builds", **kwargs,
    )  # fmt: skip


def carried_out(change: ChangeRequest) -> DeploymentRevision:
    """What a successful job leaves behind, as rows: the change succeeded, its revision
    numbered (it reached the host) and deployed."""
    ChangeRequest.objects.filter(pk=change.pk).update(status=ChangeStatus.SUCCEEDED)
    revision = change.target_revision
    assert revision is not None
    revisions.revision_number_assign(revision)
    Deployment.objects.filter(pk=change.deployment_id).update(
        current_revision=revision, model=revision.model
    )
    change.deployment.refresh_from_db()
    return revision


@pytest.fixture
def history(operator, deployment, catalog) -> dict[int, DeploymentRevision]:
    """r1 NVFP4 (adopted), r2 INT4 (a swap), r3 INT4 with --max-num-seqs=64 (a redeploy)."""
    r2 = carried_out(request(operator, deployment, "model_swap", model=catalog["INT4"]))
    r3 = carried_out(request(operator, deployment, "redeploy", extra_args=["--max-num-seqs=64"]))
    r1 = DeploymentRevision.objects.get(deployment=deployment, number=1)
    deployment.refresh_from_db()
    assert (r1.model, r2.number, r3.number) == (catalog["NVFP4"], 2, 3)
    return {1: r1, 2: r2, 3: r3}


def test_one_back_is_still_the_default_and_needs_no_second_person(operator, deployment, history):
    back = request(operator, deployment, "rollback")
    assert back.target_revision_id == history[2].pk and back.from_revision_id == history[3].pk
    # Only a harmless flag differs (HARMLESS_ENGINE_FLAGS): queued at once.
    assert (back.needs_approval, back.status) == (False, ChangeStatus.QUEUED)


def test_two_back_to_another_model_needs_the_approval_a_swap_needs(operator, deployment, history):
    back = request(operator, deployment, "rollback", revision=history[1])
    assert back.target_revision_id == history[1].pk
    assert back.status == ChangeStatus.PENDING_APPROVAL
    assert any(why.startswith("model: ") for why in back.params["approval_because"])
    event = AuditEvent.objects.get(action="change.requested", target_id=str(back.pk))
    assert (event.data["from_revision"], event.data["target_revision"]) == (3, 1)


@pytest.mark.parametrize("which", ["current", "unserved", "another deployment's"])
def test_a_revision_it_may_not_go_back_to_is_refused_naming_the_field(
    operator, deployment, history, catalog, which
):
    if which == "current":
        revision, words = history[3], "revision 3 is the one deployed now"
    elif which == "unserved":
        swap = request(operator, deployment, "model_swap", model=catalog["NVFP4"])
        ChangeRequest.objects.filter(pk=swap.pk).update(status=ChangeStatus.REJECTED)
        revision, words = swap.target_revision, "never reached the host"
    else:
        other = f.make_deployment(f.make_host("gpu-02"), catalog["NVFP4"])
        request(operator, other, "restart")  # its revision 1 is adopted
        revision = DeploymentRevision.objects.get(deployment=other, number=1)
        words = "belongs to vllm-kimi-k25.service on gpu-02, not to vllm-kimi-k25.service on gpu-01"
    with pytest.raises(services.ChangeRefused, match=words) as refused:
        request(operator, deployment, "rollback", revision=revision)
    assert refused.value.http_status == 400
    assert words in refused.value.details["fields"]["revision"]
    assert not ChangeRequest.objects.filter(kind="rollback").exists()


def test_with_no_revision_one_back_it_asks_for_one_and_names_them(operator, deployment, history):
    back = request(operator, deployment, "rollback", revision=history[1])
    ChangeRequest.objects.filter(pk=back.pk).update(status=ChangeStatus.SUCCEEDED)
    Deployment.objects.filter(pk=deployment.pk).update(current_revision=history[1])
    deployment.refresh_from_db()  # r1 was adopted, not made by a change: nothing is one back
    with pytest.raises(services.ChangeRefused, match=r"choose the one to roll back to \(3, 2\)"):
        request(operator, deployment, "rollback")
    assert request(operator, deployment, "rollback", revision=history[3]).target_revision_id == (
        history[3].pk
    )


def test_only_a_rollback_takes_a_revision(operator, deployment, history) -> None:
    assert kinds.request_field_errors("restart", model=False, shaped=[], benchmark=False,
                                      revision=True) == {
        "revision": "Only a roll back takes a revision to go back to."
    }  # fmt: skip
    with pytest.raises(services.ChangeRefused, match="Only a roll back takes a revision"):
        request(operator, deployment, "restart", revision=history[1])


# --- the change form -----------------------------------------------------------------------


def form_url(deployment) -> str:
    return reverse("deployments:change_form", args=[deployment.pk, "rollback"])


def test_the_form_offers_every_earlier_revision_with_its_model_and_date(
    client, operator, deployment, history
):
    client.force_login(operator)
    page = client.get(form_url(deployment)).content.decode()
    r1, r2 = history[1], history[2]
    assert '<select name="revision"' in page
    assert f"one back: revision 2 · {r2.model} · TP 8 · made " in page
    assert f'<option value="1">revision 1 · {r1.model} · TP 8 · made ' in page
    assert f"{r1.created_at:%Y-%m-%d %H:%M} UTC</option>" in page
    assert '<option value="3">' not in page  # the current one
    assert 'id="rollback-to">Goes back to revision 2' in page


def test_choosing_two_back_on_the_form_requests_it_and_the_preflight_follows(
    client, operator, deployment, history
):
    client.force_login(operator)
    snapshot = f.make_snapshot(deployment.host)
    data = {"snapshot_id": snapshot.pk, "reason": "NVFP4 again", "revision": "1"}
    panel = client.post(
        reverse("deployments:change_preflight", args=[deployment.pk, "rollback"]), data,
        headers={"HX-Request": "true"},
    ).content.decode()  # fmt: skip
    assert 'id="rollback-to">Goes back to revision 1' in panel
    assert "needs a second person" in panel and "model: " in panel
    response = client.post(form_url(deployment), data)
    assert response.status_code == 302
    change = ChangeRequest.objects.get(kind="rollback")
    assert change.target_revision_id == history[1].pk
    assert change.status == ChangeStatus.PENDING_APPROVAL


@pytest.mark.parametrize("value", ["3", "4", "0", "two"])
def test_a_revision_the_form_does_not_offer_is_a_form_error(
    client, operator, deployment, history, value
):
    client.force_login(operator)
    snapshot = f.make_snapshot(deployment.host)
    data = {"snapshot_id": snapshot.pk, "reason": "go back", "revision": value}
    response = client.post(form_url(deployment), data)
    assert response.status_code == 400
    assert "is not one this deployment served before the current one" in (response.content.decode())
    assert not ChangeRequest.objects.filter(kind="rollback").exists()


def test_roll_back_here_on_the_revisions_page_preselects_it(
    client, operator, viewer, deployment, history
):
    client.force_login(operator)
    revisions_page = reverse("deployments:revisions", args=[deployment.pk])
    page = client.get(revisions_page).content.decode()
    assert f'href="{form_url(deployment)}?revision=1"' in page
    assert f'href="{form_url(deployment)}?revision=3"' not in page  # serving now
    form = client.get(form_url(deployment), {"revision": "1"}).content.decode()
    assert '<option value="1" selected>' in form
    assert 'id="rollback-to">Goes back to revision 1' in form
    client.force_login(viewer)
    assert "roll back here" not in client.get(revisions_page).content.decode()


# --- the API -------------------------------------------------------------------------------


def test_the_api_takes_a_revision_number(operator, deployment, history):
    client = APIClient()
    secret = token_services.token_create(user=operator, name="tests").secret
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    body = {
        "deployment_id": deployment.pk, "kind": "rollback",
        "snapshot_id": f.make_snapshot(deployment.host).pk, "reason": "NVFP4 again",
    }  # fmt: skip
    response = client.post("/api/v1/changes/", {**body, "revision": 3}, format="json")
    assert response.status_code == 400
    refused = response.json()
    assert refused["code"] == "invalid"
    assert refused["detail"].startswith("revision: revision 3 is the one deployed now")
    assert refused["fields"]["revision"].startswith("revision 3 is the one deployed now")
    response = client.post("/api/v1/changes/", {**body, "revision": 9}, format="json")
    assert response.status_code == 400
    assert response.json()["revision"] == ["vllm-kimi-k25.service on gpu-01 has no revision 9"]
    for bad in ("one", 0, -1, 2**31):
        response = client.post("/api/v1/changes/", {**body, "revision": bad}, format="json")
        assert response.status_code == 400 and "revision" in response.json()
    restart = {**body, "kind": "restart", "revision": 1}
    response = client.post("/api/v1/changes/", restart, format="json")
    assert response.status_code == 400
    assert response.json()["revision"] == ["Only a roll back takes a revision to go back to."]
    response = client.post("/api/v1/changes/", {**body, "revision": 1}, format="json")
    assert response.status_code == 201, response.json()
    change = response.json()
    assert change["target_revision"]["number"] == 1 and change["from_revision"]["number"] == 3
    assert change["status"] == "pending_approval"
