"""A stored row that fails today's validators (written before a validator tightened, or by hand
in the database) is refused with a clear 4xx naming the field, in the API and the pages alike;
nothing reaches a host and nothing is half-created."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from controlplane.api import services as token_services
from deployments.models import ChangeRequest, Deployment, ModelArtifact
from tests import factories as f

pytestmark = pytest.mark.django_db

BAD_ROWS = {
    "unit": ("deployment", {"unit": "vllm; rm -rf /.service"}),
    "port": ("deployment", {"port": 0}),
    "extra_args": ("deployment", {"extra_args": ["--max-num-seqs", "$(reboot)"]}),
    # A value the engine refuses, stored before the values were checked.
    "extra_args value": ("deployment", {"extra_args": ["--gpu-memory-utilization=7"]}),
    "environment": ("deployment", {"environment": {"A B": "1"}}),
    "model path": ("model", {"path": "/models/x; reboot"}),
}


@pytest.fixture(params=sorted(BAD_ROWS))
def bad(request):
    catalog = f.make_catalog()
    deployment = f.make_deployment(f.make_host("gpu-01"), catalog["NVFP4"])
    snapshot = f.make_snapshot(deployment.host, age=5)
    where, fields = BAD_ROWS[request.param]
    if where == "deployment":
        Deployment.objects.filter(pk=deployment.pk).update(**fields)
    else:
        ModelArtifact.objects.filter(pk=deployment.model_id).update(**fields)
    return request.param, Deployment.objects.get(pk=deployment.pk), snapshot


def api(user):
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION=f"Bearer {token_services.token_create(user=user, name='t').secret}"
    )
    return client


@pytest.mark.parametrize("kind", ["restart", "redeploy", "stop"])
def test_the_api_answers_4xx_naming_the_field(bad, operator, kind):
    field, deployment, snapshot = bad
    body = {"deployment_id": deployment.pk, "kind": kind, "snapshot_id": snapshot.pk,
            "reason": "try it"}  # fmt: skip
    response = api(operator).post("/api/v1/changes/", body, format="json")
    assert 400 <= response.status_code < 500, (field, response.status_code, response.content[:300])
    assert response.json()["code"], response.content
    assert field.split()[0] in response.json()["detail"].lower(), response.json()
    assert not ChangeRequest.objects.exists()


def test_the_pages_answer_4xx_naming_the_field(bad, operator, client):
    field, deployment, snapshot = bad
    client.force_login(operator)
    url = reverse("deployments:change_form", args=[deployment.pk, "restart"])
    page = client.get(url)
    assert page.status_code < 500
    response = client.post(url, {"snapshot_id": snapshot.pk, "reason": "try it"})
    assert 200 <= response.status_code < 500, (field, response.status_code)
    assert field.split()[0] in response.content.decode().lower()
    assert not ChangeRequest.objects.exists()
    assert client.get(reverse("hosts:detail", args=["gpu-01"])).status_code == 200


def test_a_rollback_to_a_model_whose_stored_row_fails_today_is_refused(operator, approver):
    """The model a rollback goes back to is checked like the one a swap goes to."""
    from deployments import services
    from deployments.execution import runner

    catalog = f.make_catalog()
    deployment = f.make_deployment(f.make_host("gpu-01"), catalog["NVFP4"])
    swap = services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap", reason="INT4 is faster",
        snapshot=f.make_snapshot(deployment.host), model=catalog["INT4"],
    )  # fmt: skip
    # As if the swap ran: its revision serves, the one before it is the rollback's target.
    ChangeRequest.objects.filter(pk=swap.pk).update(status="succeeded")
    swap.refresh_from_db()
    runner._apply_revision_to_deployment(swap)
    ModelArtifact.objects.filter(pk=catalog["NVFP4"].pk).update(path="/models/x; reboot")
    deployment.refresh_from_db()
    with pytest.raises(services.ChangeRefused) as refused:
        services.change_request_create(
            user=operator, deployment=deployment, kind="rollback", reason="back to NVFP4",
            snapshot=f.make_snapshot(deployment.host),
        )  # fmt: skip
    assert "target model path" in refused.value.message
    assert ChangeRequest.objects.count() == 1


def test_the_service_itself_checks_typed_arguments(operator):
    """Not only the form and the serializer: a caller of the service gets the same refusal."""
    from deployments import services

    catalog = f.make_catalog()
    deployment = f.make_deployment(f.make_host("gpu-01"), catalog["NVFP4"])
    with pytest.raises(services.ChangeRefused) as refused:
        services.change_request_create(
            user=operator, deployment=deployment, kind="redeploy", reason="tune",
            snapshot=f.make_snapshot(deployment.host), extra_args=["--download-dir=/tmp/%h"],
        )  # fmt: skip
    assert refused.value.code == "invalid" and "extra arguments" in refused.value.message
    assert not ChangeRequest.objects.exists()
