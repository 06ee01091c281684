"""Evaluation on the change pages: the benchmark profile picker, a pre-flight shown once (and
only once a model is picked), the integrity warning and its acknowledgement, the approver's
review with the fit per GPU and the unit diff, and the evaluations of a change."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from deployments import services
from deployments.models import ChangeRequest, Deployment, Evaluation
from tests import factories as f

pytestmark = pytest.mark.django_db
PATCHED = "vllm/model_executor/layers/fused_moe/fused_moe.py"


def form_url(deployment, kind, suffix=""):
    return reverse("deployments:change_form", args=[deployment.pk, kind]) + suffix


def get(client, user, url):
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_the_default_benchmark_profile_is_preselected(client, operator, deployment):
    f.make_snapshot(deployment.host)
    standard = f.default_benchmark_profile()
    for kind in ("restart", "model_swap", "engine_repair", "rollback"):
        body = get(client, operator, form_url(deployment, kind))
        assert f'<option value="{standard.pk}" selected>' in body, kind
        assert "no benchmark" in body
    assert 'name="benchmark_profile"' not in get(client, operator, form_url(deployment, "stop"))


def test_the_picked_profile_is_frozen_into_the_change(client, operator, deployment):
    snapshot = f.make_snapshot(deployment.host)
    client.force_login(operator)
    standard = f.default_benchmark_profile()
    client.post(
        form_url(deployment, "restart"),
        {"snapshot_id": snapshot.pk, "reason": "patch", "benchmark_profile": standard.pk},
    )
    assert ChangeRequest.objects.get().params["benchmark"] == standard.definition()


def test_a_swap_shows_its_pre_flight_once_a_model_is_picked(client, operator, deployment, catalog):
    f.make_snapshot(deployment.host)
    body = get(client, operator, form_url(deployment, "model_swap"))
    preflight = body[body.index('id="preflight"') :]
    assert "Pick a model" in preflight and "Memory:" not in preflight
    response = client.post(
        form_url(deployment, "model_swap", "preflight/"), {"model": catalog["INT4"].pk}
    )
    assert response.status_code == 200
    picked = response.content.decode()
    assert "Memory: fits (tensor-parallel 8)" in picked
    assert len(re.findall(r"<td>\d</td><td>95\.6 GiB</td>", picked)) == 8  # the fit per GPU


def test_a_refusal_is_shown_once(client, operator, deployment, catalog):
    snapshot = f.make_snapshot(deployment.host)
    client.force_login(operator)
    response = client.post(
        form_url(deployment, "model_swap"),
        {"snapshot_id": snapshot.pk, "reason": "try FP8", "model": catalog["FP8"].pk},
    )
    assert response.status_code == 409
    body = response.content.decode()
    assert body.count("does not fit") == 1
    assert "Not requested." in body


def test_a_swap_on_a_patched_engine_warns_and_asks_for_an_acknowledgement(
    client, operator, deployment, catalog
):
    snapshot = f.make_integrity_snapshot(deployment.host, modified=(PATCHED,))
    client.force_login(operator)
    data = {"snapshot_id": snapshot.pk, "reason": "faster", "model": catalog["INT4"].pk}
    refused = client.post(form_url(deployment, "model_swap"), data)
    assert refused.status_code == 409
    body = refused.content.decode()
    assert body.count("the engine integrity check is not clean") == 1
    assert 'name="acknowledge_integrity"' in body
    accepted = client.post(
        form_url(deployment, "model_swap"), {**data, "acknowledge_integrity": "on"}
    )
    assert accepted.status_code == 302
    change = ChangeRequest.objects.get()
    page = get(client, operator, reverse("deployments:change", args=[change.pk]))
    assert 'id="integrity-acknowledged"' in page and PATCHED in page


def test_the_engine_repair_form_says_what_it_reinstalls(client, operator, deployment):
    f.make_integrity_snapshot(deployment.host, modified=(PATCHED,))
    body = get(client, operator, form_url(deployment, "engine_repair"))
    assert "<code>vllm==0.11.2</code>" in body and "the index pip is configured with" in body
    assert "1 modified" in body
    assert "every engine repair needs a second person" in body


def test_the_approver_reviews_the_fit_per_gpu_and_the_unit_diff(
    client, operator, approver, deployment, catalog
):
    change = services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap",
        snapshot=f.make_snapshot(deployment.host), reason="faster", model=catalog["INT4"],
    )  # fmt: skip
    f.make_snapshot(deployment.host)
    body = get(client, approver, reverse("deployments:change", args=[change.pk]))
    review = body[body.index('id="review-preflight"') : body.index('id="review-diff"')]
    assert "Memory: fits (tensor-parallel 8): 69.4 GiB weights" in review  # INT4, not NVFP4
    assert len(re.findall(r"<td>\d</td><td>95\.6 GiB</td>", review)) == 8
    assert "Engine files: not checked yet" in review
    diff = body[body.index('id="review-diff"') :]
    assert '<span class="diff-add">+ExecStart=' in diff and "Kimi-K2.5-INT4" in diff
    assert '<span class="diff-remove">-ExecStart=' in diff


def test_a_rollback_is_checked_with_the_model_it_rolls_back_to(
    client, operator, deployment, catalog
):
    swap = services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap",
        snapshot=f.make_snapshot(deployment.host), reason="faster", model=catalog["INT4"],
    )  # fmt: skip
    # The swap went through: INT4 (revision 2) serves, NVFP4 (revision 1) is the way back.
    Deployment.objects.filter(pk=deployment.pk).update(
        current_revision=swap.target_revision, model=catalog["INT4"]
    )
    ChangeRequest.objects.filter(pk=swap.pk).update(status="succeeded")
    f.make_snapshot(deployment.host)
    body = get(client, operator, form_url(deployment, "rollback"))
    assert "revision 1: moonshotai/Kimi-K2.5 (NVFP4)" in body
    assert "Memory: fits (tensor-parallel 8): 74.4 GiB weights" in body  # NVFP4's 595 GiB / 8
    # Going back to another model needs a second person, as a swap does.
    assert "model: " in body and "needs a second person" in body


def test_the_change_page_shows_its_evaluations_and_an_earlier_failure(
    client, viewer, operator, deployment
):
    change = services.change_request_create(
        user=operator, deployment=deployment, kind="restart",
        snapshot=f.make_snapshot(deployment.host), reason="patch",
    )  # fmt: skip
    now = timezone.now()
    checks = [
        {"name": "five-token prompt", "outcome": "failed", "detail": "expected 'Tokyo'",
         "answer": " blor", "prompt": "The capital of Japan is", "prompt_tokens": 5}
    ]  # fmt: skip
    for phase, passed in (("baseline", False), ("after", False)):
        Evaluation.objects.create(
            deployment=deployment, revision=change.from_revision, change=change, phase=phase,
            kind="coherence", started_at=now, finished_at=now, passed=passed,
            summary="failed 1 of 7 checks: five-token prompt", results={"checks": checks},
        )  # fmt: skip
    body = get(client, viewer, reverse("deployments:change", args=[change.pk]))
    assert 'id="baseline-failed"' in body and "Already failing before the change" in body
    assert body.count("outcome-failed") == 2
    assert "(5 prompt tokens)" in body
