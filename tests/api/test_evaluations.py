"""Benchmark profiles and evaluations through the API (read-only), and the new change
parameters: a benchmark profile, and acknowledging an engine whose files differ."""

from __future__ import annotations

import pytest

from deployments.models import BenchmarkProfile, Evaluation
from tests import factories as f
from tests.revision_history import make_week_history

from .conftest import refusal
from .test_changes import create

pytestmark = pytest.mark.django_db
PATCHED = "vllm/model_executor/layers/fused_moe/fused_moe.py"


def test_the_benchmark_profiles(api_for, viewer):
    f.default_benchmark_profile()
    client = api_for(viewer)
    body = client.get("/api/v1/benchmark-profiles/").json()
    (standard,) = body["results"]
    assert standard["name"] == "standard" and standard["is_default"] is True
    assert standard["concurrency_levels"] == [1, 8, 32, 64]
    assert (standard["input_tokens"], standard["output_tokens"]) == (128, 256)
    one = client.get(f"/api/v1/benchmark-profiles/{standard['id']}/")
    assert one.json() == standard
    assert client.get("/api/v1/benchmark-profiles/987654/").status_code == 404
    # Read-only: profiles are an administrator's, in the admin.
    assert client.post("/api/v1/benchmark-profiles/", {}, format="json").status_code == 405


def test_revisions_with_their_evaluations(api_for, viewer, operator):
    deployment = make_week_history(f.make_host("gpu-01"), operator)
    client = api_for(viewer)
    body = client.get(f"/api/v1/deployments/{deployment.pk}/revisions/").json()
    assert [r["number"] for r in body["results"]] == [4, 3, 2, 1]
    int4 = body["results"][0]
    assert int4["model"]["variant"] == "INT4"
    assert {(e["phase"], e["kind"], e["passed"]) for e in int4["evaluations"]} == {
        ("after", "coherence", True),
        ("after", "benchmark", True),
    }
    runs = client.get(f"/api/v1/deployments/{deployment.pk}/revisions/4/evaluations/").json()
    bench = next(e for e in runs["results"] if e["kind"] == "benchmark")
    levels = {lv["concurrency"]: lv["output_tok_s"] for lv in bench["results"]["levels"]}
    assert levels[1] == pytest.approx(82, rel=0.1) and levels[64] == pytest.approx(2200, rel=0.1)
    assert bench["results"]["profile"]["name"] == "standard"
    # Stored before ITL was per chunk: shown as what it was, per token, and no per-chunk figure.
    first = bench["results"]["levels"][0]
    assert first["schema"] == 1 and first["itl_ms"] == {"p50": None, "p99": None}
    assert first["itl_per_token_ms"]["p50"] > 0
    missing = client.get(f"/api/v1/deployments/{deployment.pk}/revisions/9/evaluations/")
    assert missing.status_code == 404
    assert client.get("/api/v1/deployments/987654/revisions/").status_code == 404


def test_a_change_runs_the_benchmark_profile_it_names(api_for, operator, deployment):
    profile = BenchmarkProfile.objects.create(
        name="long outputs", concurrency_levels=[1, 16], input_tokens=64, output_tokens=1024
    )
    response = create(
        api_for(operator), deployment, f.make_snapshot(deployment.host), "restart",
        benchmark_profile_id=profile.pk,
    )  # fmt: skip
    assert response.status_code == 201, response.content
    assert response.json()["params"]["benchmark"] == profile.definition()
    assert response.json()["evaluations"] == []
    stop = create(
        api_for(operator), deployment, f.make_snapshot(deployment.host), "stop",
        benchmark_profile_id=profile.pk,
    )  # fmt: skip
    assert stop.status_code == 400 and "benchmark_profile_id" in stop.json()


def test_a_swap_on_a_patched_engine_answers_409_until_acknowledged(
    api_for, operator, deployment, catalog
):
    snapshot = f.make_integrity_snapshot(deployment.host, modified=(PATCHED,))
    client = api_for(operator)
    refused = create(client, deployment, snapshot, "model_swap", model_id=catalog["INT4"].pk)
    assert refused.status_code == 409
    body = refusal(refused)
    assert body["code"] == "conflict" and body["needs_integrity_acknowledgement"] is True
    ok = create(
        client, deployment, snapshot, "model_swap", model_id=catalog["INT4"].pk,
        acknowledge_integrity=True,
    )  # fmt: skip
    assert ok.status_code == 201, ok.content
    assert PATCHED in ok.json()["params"]["integrity_acknowledged"]["found"]


def test_an_engine_repair_through_the_api(api_for, operator, deployment):
    snapshot = f.make_integrity_snapshot(deployment.host, modified=(PATCHED,))
    response = create(api_for(operator), deployment, snapshot, "engine_repair")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "pending_approval"
    assert body["params"]["engine_package"]["version"] == "0.11.2"
    assert not Evaluation.objects.exists()
