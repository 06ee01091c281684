"""Served names as the engines take them: vLLM's default served name is the model id, so
`meta-llama/Llama-3.1-8B-Instruct` is the most common one there is. Accepted wherever a served
name is checked or used (the catalog row, the stored-row check every change starts with, the unit
file, the benchmark client, the coherence requests), refused only when it cannot be one word of
a command line: empty, whitespace or control characters, a leading `-`, what systemd rewrites,
too long."""

from __future__ import annotations

import json
import shlex

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from deployments import services
from deployments.choices import ChangeStatus
from deployments.evaluation.coherence import request_for
from deployments.models import ChangeRequest, CoherenceCheck, Evaluation, ModelArtifact
from deployments.unit_files import units
from deployments.unit_files.serving_plan import plan_from_unit_text
from hosts import commands, engine_commands
from simulator.state import parse_vllm_argv
from tests import factories as f

SLASHED = [
    "meta-llama/Llama-3.1-8B-Instruct",
    "nvidia/Kimi-K2.5-NVFP4",
    "/models/moonshotai/Kimi-K2.5-INT4",  # vLLM's default when the model is a path
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
    "gpt-oss:120b",
    "kimi-k2.5",
]
REFUSED = [
    "",
    " ",
    "kimi k2.5",
    "kimi\tk2.5",
    "kimi-k2.5\n",
    "kimi\nExecStart=/bin/sh",
    "kimi\x00",
    "kimi\x1b[2J",
    "kimi\u2028k2",  # a line separator
    "kimi\u200bk2",  # a zero-width space
    "-kimi",  # argparse reads a flag
    "--served-model-name",
    "kimi-%n",  # systemd specifier
    "kimi-${HF_TOKEN}",  # systemd variable
    "kimi\\x20k2",  # systemd C escape
    "kimi'k2",
    'kimi"k2',
    "x" * 129,
]


def model_row(served: str) -> ModelArtifact:
    return ModelArtifact(
        name="meta-llama/Llama-3.1-8B-Instruct", variant="FP8", weights_gib=16,
        path="/models/meta-llama/Llama-3.1-8B-Instruct", served_name=served,
    )  # fmt: skip


@pytest.mark.parametrize("served", SLASHED)
def test_the_catalog_takes_the_names_engines_serve(served):
    model_row(served).full_clean(validate_unique=False, validate_constraints=False)


@pytest.mark.parametrize("served", REFUSED)
def test_the_catalog_refuses_what_cannot_be_one_word(served):
    with pytest.raises(ValidationError) as refused:
        model_row(served).full_clean(validate_unique=False, validate_constraints=False)
    assert set(refused.value.message_dict) == {"served_name"}


def test_the_refusal_says_what_a_served_name_may_be():
    with pytest.raises(ValidationError) as refused:
        model_row("kimi k2.5").full_clean(validate_unique=False, validate_constraints=False)
    (message,) = refused.value.message_dict["served_name"]
    assert "meta-llama/Llama-3.1-8B-Instruct" in message
    assert "% $" in message and "%%" not in message


@pytest.mark.parametrize("served", SLASHED)
def test_the_unit_passes_it_as_one_word_and_reads_it_back(served):
    spec = units.UnitSpec(
        unit=f.UNIT, engine="vllm", engine_binary="/opt/vllm/.venv/bin/vllm",
        model_path="/models/meta-llama/Llama-3.1-8B-Instruct", served_name=served,
        tensor_parallel_size=1, max_model_len=8192, port=8000, bind_address="127.0.0.1",
        extra_args=(),
    )  # fmt: skip
    text = units.render_unit(spec)
    argv = shlex.split(units.exec_start(spec))
    assert argv[argv.index("--served-model-name") + 1] == served
    assert plan_from_unit_text(text).served_names == (served,)
    engine = parse_vllm_argv(tuple(argv))  # the simulator reads it as vLLM's argparse does
    assert engine is not None and engine.served_names == (served,), engine


@pytest.mark.parametrize("served", SLASHED)
def test_the_benchmark_and_the_coherence_suite_send_it(served):
    argv = engine_commands.bench_client(
        "/opt/vllm/.venv/bin/python3", port=8000, model=served, concurrency=1,
        input_tokens=8, output_tokens=8, timeout=10, duration=5,
    )  # fmt: skip
    assert argv[argv.index("--model") + 1] == served
    check = CoherenceCheck(kind="factual", name="capital", prompt="The capital is", expect="x")
    _endpoint, body = request_for(check, served)
    assert json.loads(json.dumps(body))["model"] == served


@pytest.mark.parametrize("served", ["-x", "a b", "a\n", "kimi-${HF_TOKEN}", ""])
def test_the_benchmark_still_refuses_what_the_catalog_refuses(served):
    with pytest.raises(commands.UnsafeCommand):
        engine_commands.bench_client(
            "/opt/vllm/.venv/bin/python3", port=8000, model=served, concurrency=1,
            input_tokens=8, output_tokens=8, timeout=10, duration=5,
        )  # fmt: skip


@pytest.fixture
def slashed(db):
    """gpu-01 serving a model whose served name is its repository id."""
    catalog = f.make_catalog()
    ModelArtifact.objects.filter(pk=catalog["NVFP4"].pk).update(served_name=SLASHED[1])
    ModelArtifact.objects.filter(pk=catalog["INT4"].pk).update(served_name=SLASHED[0])
    deployment = f.make_deployment(f.make_host("gpu-01"), catalog["NVFP4"])
    snapshot = f.make_snapshot(deployment.host, parsed=f.parsed_state(model=SLASHED[1]))
    return deployment, snapshot, ModelArtifact.objects.get(pk=catalog["INT4"].pk)


def test_a_deployment_so_named_can_be_restarted_and_swapped(slashed, operator):
    deployment, snapshot, int4 = slashed
    restart = services.change_request_create(
        user=operator, deployment=deployment, kind="restart", snapshot=snapshot,
        reason="pick up the patched driver",
    )  # fmt: skip
    assert restart.status == ChangeStatus.QUEUED
    ChangeRequest.objects.filter(pk=restart.pk).update(status=ChangeStatus.SUCCEEDED)
    swap = services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap", snapshot=snapshot,
        reason="INT4 serves more tokens per second", model=int4,
    )  # fmt: skip
    assert swap.status == ChangeStatus.PENDING_APPROVAL and swap.target_revision is not None
    assert f"--served-model-name {SLASHED[0]} " in swap.target_revision.unit_text


def test_the_api_restarts_a_deployment_so_named(slashed, operator, api_for):
    deployment, snapshot, _int4 = slashed
    body = {"deployment_id": deployment.pk, "kind": "restart", "snapshot_id": snapshot.pk,
            "reason": "pick up the patched driver"}  # fmt: skip
    response = api_for(operator).post("/api/v1/changes/", body, format="json")
    assert response.status_code == 201, response.content
    models = api_for(operator).get("/api/v1/models/").json()["results"]
    assert {m["served_name"] for m in models} >= {SLASHED[0], SLASHED[1]}


def test_the_pages_restart_a_deployment_so_named(slashed, operator, client):
    deployment, snapshot, _int4 = slashed
    client.force_login(operator)
    url = reverse("deployments:change_form", args=[deployment.pk, "restart"])  # by its pk
    page = client.get(url)
    assert page.status_code == 200 and SLASHED[1] in page.content.decode()
    response = client.post(url, {"snapshot_id": snapshot.pk, "reason": "pick up the driver"})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert ChangeRequest.objects.get().kind == "restart"
    host_page = client.get(reverse("hosts:detail", args=["gpu-01"]))
    assert host_page.status_code == 200 and SLASHED[1] in host_page.content.decode()


@pytest.mark.integration
def test_a_swap_to_a_slashed_served_name_serves_it_on_a_simulated_host(
    make_fleet, celery_worker, operator, approver
):
    """Real worker, real SSH: the unit names it, the simulated vLLM lists it in /v1/models,
    the coherence suite and the post-change check ask for it by that name."""
    from tests.fleet import register
    from tests.waiting import wait_for_change

    fleet = register(make_fleet(1))
    deployment = fleet.deployments[0]
    ModelArtifact.objects.filter(variant="INT4").update(served_name=SLASHED[0])
    int4 = ModelArtifact.objects.get(name="moonshotai/Kimi-K2.5", variant="INT4")

    def probe():
        from hosts import services as host_services
        from hosts.models import Host

        host = Host.objects.select_related("credential").get(pk=deployment.host_id)
        snapshot = host_services.host_probe(host=host, trigger="manual")
        assert snapshot.status == "ok", snapshot.error
        return snapshot

    change = services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap", snapshot=probe(),
        reason="INT4 serves more tokens per second", model=int4,
    )  # fmt: skip
    services.change_request_approve(
        change=change, approver=approver, snapshot=probe(), reason="looks fine"
    )
    change = wait_for_change(change)
    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    assert fleet.state("gpu-01")["models"] == [SLASHED[0]]
    assert change.after_snapshot.state().served_models(f.UNIT) == [SLASHED[0]]
    suite = Evaluation.objects.get(change=change, revision=change.target_revision, kind="coherence")
    assert suite.passed and suite.results["served_name"] == SLASHED[0], suite.results


@pytest.fixture
def api_for(db):
    from rest_framework.test import APIClient

    from controlplane.api import services as token_services

    def make(user):
        client = APIClient()
        secret = token_services.token_create(user=user, name="tests").secret
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
        return client

    return make
