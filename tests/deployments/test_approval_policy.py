"""What serves is what was approved: extra arguments cannot change the deployment's identity,
and any change of what serves or how it is exposed waits for a second person."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from controlplane.audit.models import AuditEvent
from deployments import services
from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest, ModelArtifact
from tests import factories as f

pytestmark = pytest.mark.django_db


def redeploy(operator, deployment, **kwargs):
    return services.change_request_create(
        user=operator, deployment=deployment, kind="redeploy",
        snapshot=f.make_snapshot(deployment.host), reason="tune the engine", **kwargs,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("extra_args", "flag"),
    [
        # Another model's weights under the approved served name (seen in a review).
        (["--model=/models/Qwen/Qwen3-235B-A22B-FP8", "--served-model-name=kimi-k2.5"], "--model"),
        # Past the fit check: it was computed for tensor-parallel 8.
        (["--tensor-parallel-size=1"], "--tensor-parallel-size"),
        (["--tensor_parallel_size", "1"], "--tensor-parallel-size"),
        (["--tensor-parallel=1"], "--tensor-parallel-size"),
        # Open to the network, no approval.
        (["--host=0.0.0.0", "--trust-remote-code"], "--host"),
        (["--ho", "0.0.0.0"], "--host"),
    ],
)
def test_extra_arguments_cannot_set_what_the_deployment_sets(
    operator, deployment, extra_args, flag
):
    with pytest.raises(services.ChangeRefused) as refused:
        redeploy(operator, deployment, extra_args=extra_args)
    assert refused.value.code == "invalid"
    assert flag in refused.value.message and "deployment's" in refused.value.message
    assert not ChangeRequest.objects.exists()
    assert not AuditEvent.objects.filter(action="change.requested").exists()


def test_a_security_relevant_flag_needs_a_second_person(operator, deployment):
    change = redeploy(operator, deployment, extra_args=["--trust-remote-code"])
    assert change.needs_approval and change.status == ChangeStatus.PENDING_APPROVAL
    assert change.params["approval_because"] == [
        "--trust-remote-code: unset → set (runs Python code shipped with the model repository)"
    ]
    event = AuditEvent.objects.get(action="change.requested")
    assert event.data["approval_because"] == change.params["approval_because"]


def test_a_new_tensor_parallel_size_needs_a_second_person(operator, deployment, catalog):
    ModelArtifact.objects.filter(pk=catalog["NVFP4"].pk).update(weights_gib=200)  # fits on 4
    deployment.refresh_from_db()
    change = redeploy(operator, deployment, tensor_parallel_size=4)
    assert change.status == ChangeStatus.PENDING_APPROVAL
    assert any("tensor-parallel size: 8 → 4" in why for why in change.params["approval_because"])


def test_a_redeploy_with_only_harmless_flags_goes_without_approval(operator, deployment):
    change = redeploy(operator, deployment, extra_args=["--max-num-seqs=64", "--enforce-eager"])
    assert not change.needs_approval and change.status == ChangeStatus.QUEUED
    assert change.params["approval_because"] == []
    assert "--max-num-seqs=64 --enforce-eager" in change.target_revision.unit_text


def test_a_flag_no_administrator_marked_harmless_needs_approval(operator, deployment, settings):
    settings.HARMLESS_ENGINE_FLAGS = []
    change = redeploy(operator, deployment, extra_args=["--max-num-seqs=64"])
    assert change.status == ChangeStatus.PENDING_APPROVAL


def test_an_edited_catalog_entry_cannot_slip_a_new_model_into_a_redeploy(
    operator, deployment, catalog
):
    services.change_target_for(deployment=deployment, kind="restart")  # revision 1 is adopted
    ModelArtifact.objects.filter(pk=catalog["NVFP4"].pk).update(
        path="/models/Qwen/Qwen3-235B-A22B-FP8"
    )
    deployment.refresh_from_db()
    change = redeploy(operator, deployment, extra_args=["--max-num-seqs=64"])
    assert change.status == ChangeStatus.PENDING_APPROVAL
    assert any(why.startswith("model: ") for why in change.params["approval_because"])


def test_a_rollback_that_changes_the_model_needs_approval(
    operator, approver, deployment, catalog, host
):
    from deployments.models import DeploymentRevision

    swap = services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap", snapshot=f.make_snapshot(host),
        reason="INT4 is faster", model=catalog["INT4"],
    )  # fmt: skip
    # The swap went through: INT4 is what serves now.
    ChangeRequest.objects.filter(pk=swap.pk).update(status=ChangeStatus.SUCCEEDED)
    deployment.current_revision = DeploymentRevision.objects.get(pk=swap.target_revision_id)
    deployment.model = catalog["INT4"]
    deployment.save()
    rollback = services.change_request_create(
        user=operator, deployment=deployment, kind="rollback",
        snapshot=f.make_snapshot(host, parsed=f.parsed_state(model="kimi-k2.5-int4")),
        reason="INT4 lost coherence",
    )  # fmt: skip
    assert rollback.status == ChangeStatus.PENDING_APPROVAL
    assert any(why.startswith("model: ") for why in rollback.params["approval_because"])


def test_a_stored_row_with_a_reserved_flag_is_refused_with_a_clear_reason(operator, deployment):
    from deployments.models import Deployment

    # Written before the rule existed, or by hand: the next redeploy names the argument.
    Deployment.objects.filter(pk=deployment.pk).update(extra_args=["--port=9000"])
    deployment.refresh_from_db()
    with pytest.raises(services.ChangeRefused, match="--port is set by the deployment's port"):
        redeploy(operator, deployment)


def test_marking_a_sensitive_flag_harmless_fails_the_system_check(settings):
    settings.HARMLESS_ENGINE_FLAGS = ["--max-num-seqs", "--trust-remote"]
    with pytest.raises(SystemCheckError, match=r"deployments\.E001"):
        call_command("check")


def test_a_pipeline_parallel_flag_is_counted_in_the_fit(operator, deployment):
    # Eight GPUs cannot hold tensor-parallel 8 x pipeline-parallel 2.
    with pytest.raises(services.ChangeRefused, match="needs 16 GPUs"):
        redeploy(operator, deployment, extra_args=["--pipeline-parallel-size=2"])


def test_an_edited_engine_program_cannot_slip_into_a_redeploy(operator, deployment):
    from deployments.models import Deployment

    services.change_target_for(deployment=deployment, kind="restart")  # revision 1 is adopted
    Deployment.objects.filter(pk=deployment.pk).update(engine_binary="/opt/other/bin/vllm")
    deployment.refresh_from_db()
    change = redeploy(operator, deployment)
    assert change.status == ChangeStatus.PENDING_APPROVAL
    assert change.params["approval_because"] == [
        "engine program: /opt/vllm/.venv/bin/vllm → /opt/other/bin/vllm "
        "(changes the program that serves)"
    ]


def test_a_parallel_size_below_one_is_refused(operator, deployment):
    # Refused as the engine refuses it, before anything is sized.
    with pytest.raises(services.ChangeRefused, match="--data-parallel-size must be a positive"):
        redeploy(operator, deployment, extra_args=["--data-parallel-size=0"])
