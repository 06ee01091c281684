"""Deployments and the model catalog: read-only, for every role."""

from __future__ import annotations

import pytest

from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/api/v1/deployments/", "/api/v1/models/"])
def test_lists_need_credentials_and_a_role(api_for, outsider, deployment, path):
    assert api_for(None).get(path).status_code == 401
    assert api_for(outsider).get(path).status_code == 403


def test_deployments_with_their_model_and_revision(api_for, viewer, deployment, catalog):
    other = f.make_deployment(f.make_host("gpu-02"), catalog["INT4"])
    client = api_for(viewer)
    body = client.get("/api/v1/deployments/").json()
    assert [d["id"] for d in body["results"]] == [deployment.pk, other.pk]
    first = body["results"][0]
    assert first["host"] == "gpu-01"
    assert first["unit"] == "vllm-kimi-k25.service"
    assert first["model"] == {
        "id": catalog["NVFP4"].pk,
        "name": "moonshotai/Kimi-K2.5",
        "variant": "NVFP4",
        "served_name": "kimi-k2.5",
        "weights_gib": 595.0,
    }
    assert first["current_revision"] is None
    only = client.get("/api/v1/deployments/", {"host": "gpu-02"}).json()["results"]
    assert [d["id"] for d in only] == [other.pk]


def test_one_deployment(api_for, operator, deployment):
    client = api_for(operator)
    body = client.get(f"/api/v1/deployments/{deployment.pk}/").json()
    assert body["tensor_parallel_size"] == 8
    assert body["port"] == 8000
    assert client.get(f"/api/v1/deployments/{deployment.pk + 99}/").status_code == 404


def test_the_model_catalog(api_for, approver, catalog):
    client = api_for(approver)
    body = client.get("/api/v1/models/").json()
    assert [m["variant"] for m in body["results"]] == ["NVFP4", "INT4", "FP8"]
    fp8 = client.get(f"/api/v1/models/{catalog['FP8'].pk}/").json()
    assert fp8["weights_gib"] == 1030.0
    assert fp8["path"] == "/models/moonshotai/Kimi-K2.5-FP8"
    assert client.get("/api/v1/models/999999/").status_code == 404


def test_reads_only(api_for, admin_user, deployment):
    client = api_for(admin_user)
    assert client.post("/api/v1/deployments/", {}).status_code == 405
    assert client.delete(f"/api/v1/models/{deployment.model_id}/").status_code == 405
