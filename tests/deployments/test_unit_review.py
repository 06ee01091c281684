"""What two revisions differ in is everything that decides what runs and how it is exposed, in
one comparison that approvals, rollbacks and the revision diff share; a rewrite keeps every
line it is not about (hand-written units with several command lines, no --host, drop-ins)."""

from __future__ import annotations

import hashlib

import pytest

from deployments import revisions, services
from deployments.choices import ChangeStatus
from deployments.evaluation import comparison
from deployments.models import ChangeRequest, Deployment
from deployments.unit_files import units
from deployments.unit_files.serving_plan import unit_differences
from tests import factories as f

pytestmark = pytest.mark.django_db
UNIT = f.UNIT
ENGINE = (
    "/opt/vllm/.venv/bin/vllm serve /models/moonshotai/Kimi-K2.5-NVFP4 --served-model-name "
    "kimi-k2.5 --tensor-parallel-size 8 --max-model-len 262144 --port 8000"
)
# A hand-written oneshot-style unit: a pre-step, a warm-up command line before the engine's,
# and no --host (vLLM then listens on every interface).
HAND_WRITTEN = f"""\
[Unit]
Description=Kimi K2.5 (vLLM)

[Service]
Type=simple
User=vllm
ExecStartPre=/usr/bin/nvidia-smi -pm 1
ExecStart=/opt/vllm/.venv/bin/python3 -c 'import torch'
ExecStart={ENGINE}
Restart=on-failure

[Install]
WantedBy=multi-user.target
"""


def snapshot_with_unit(host, text: str, *drop_ins: tuple[str, str]):
    parsed = f.parsed_state()
    files = [(f"/etc/systemd/system/{UNIT}", text), *drop_ins]
    parsed["deployments"][UNIT]["unit_files"] = [
        {"path": path, "text": body, "sha256": hashlib.sha256(body.encode()).hexdigest()}
        for path, body in files
    ]
    return f.make_snapshot(host, parsed=parsed)


def request(user, deployment, kind, snapshot, **kwargs):
    return services.change_request_create(
        user=user, deployment=deployment, kind=kind, snapshot=snapshot,
        reason="tune the engine", **kwargs,
    )  # fmt: skip


def reasons_between(before: str, after: str) -> list[str]:
    return [f"{c.describe()} ({c.why})" for c in unit_differences(before, after) if c.why]


# --- the comparison --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (("ExecStartPre=/usr/bin/nvidia-smi -pm 1", "ExecStartPre=/tmp/x.sh"), "ExecStartPre="),
        (("ExecStart=/opt/vllm/.venv/bin/python3 -c 'import torch'", ""), "ExecStart="),
        (("User=vllm", "User=root"), "User="),
        (("Type=simple", "Type=forking"), "Type="),
        (("Restart=on-failure", "Restart=on-failure\nEnvironmentFile=/tmp/e"), "EnvironmentFile="),
        (("Restart=on-failure", "Restart=on-failure\nWorkingDirectory=/tmp"), "WorkingDirectory="),
        (("User=vllm", "User=vllm\nGroup=wheel"), "Group="),
    ],
)
def test_every_directive_that_decides_what_runs_is_compared(edit, named) -> None:
    after = HAND_WRITTEN.replace(*edit)
    reasons = reasons_between(HAND_WRITTEN, after)
    assert reasons and all(named in why for why in reasons), reasons


def test_the_order_of_the_command_lines_is_compared() -> None:
    pre = "ExecStartPre=/usr/bin/nvidia-smi -pm 1\n"
    swapped = HAND_WRITTEN.replace(pre, pre + "ExecStartPre=/usr/bin/true\n")
    reordered = HAND_WRITTEN.replace(pre, "ExecStartPre=/usr/bin/true\n" + pre)
    assert reasons_between(swapped, reordered)


def test_harmless_directives_need_no_second_person() -> None:
    after = HAND_WRITTEN.replace("Restart=on-failure", "Restart=always\nRestartSec=5").replace(
        "Description=Kimi K2.5 (vLLM)", "Description=Kimi"
    )
    assert after != HAND_WRITTEN
    assert reasons_between(HAND_WRITTEN, after) == []


# --- rewriting --------------------------------------------------------------------------------


def test_a_rewrite_keeps_every_line_but_the_engines_command_line() -> None:
    new = ENGINE.replace("NVFP4", "INT4")
    text = units.rewrite_unit(HAND_WRITTEN, exec_start_line=new, old_env={}, new_env={})
    assert [line for line in HAND_WRITTEN.splitlines() if line not in text.splitlines()] == [
        f"ExecStart={ENGINE}"
    ]
    assert f"ExecStart={new}" in text
    assert "ExecStart=/opt/vllm/.venv/bin/python3 -c 'import torch'" in text


def test_a_rewrite_keeps_the_command_lines_prefix() -> None:
    text = HAND_WRITTEN.replace(f"ExecStart={ENGINE}", f"ExecStart=-{ENGINE}")
    rewritten = units.rewrite_unit(text, exec_start_line=ENGINE, old_env={}, new_env={})
    assert f"ExecStart=-{ENGINE}" in rewritten


def test_a_rendered_description_stops_naming_a_revision() -> None:
    old = "[Unit]\nDescription=vllm server kimi-k2.5 (controlplane revision 1)\n\n[Service]\n"
    rewritten = units.rewrite_unit(
        old + f"ExecStart={ENGINE}\n", exec_start_line=ENGINE, old_env={}, new_env={}, unit=UNIT
    )
    assert "revision 1" not in rewritten
    assert f"Description={units.description(UNIT)}" in rewritten


def test_a_command_line_that_runs_no_engine_is_refused_naming_its_line(operator, catalog):
    host = f.make_host()
    deployment = f.make_deployment(host, catalog["NVFP4"])
    wrapped = HAND_WRITTEN.replace(f"ExecStart={ENGINE}", f"ExecStart=/bin/bash -c '{ENGINE}'")
    with pytest.raises(services.ChangeRefused) as refused:
        request(operator, deployment, "redeploy", snapshot_with_unit(host, wrapped))
    assert "does not start vLLM or SGLang" in refused.value.message
    assert "line 9" in refused.value.message


# --- requests on hand-written units -------------------------------------------------------------


@pytest.fixture
def hand_written(catalog):
    host = f.make_host()
    deployment = f.make_deployment(host, catalog["NVFP4"])
    return host, deployment


def test_a_redeploy_keeps_the_other_command_lines_and_goes_without_approval(operator, hand_written):
    host, deployment = hand_written
    change = request(
        operator, deployment, "redeploy", snapshot_with_unit(host, HAND_WRITTEN),
        extra_args=["--max-num-seqs=64"],
    )  # fmt: skip
    assert change.status == ChangeStatus.QUEUED, change.params["approval_because"]
    text = change.target_revision.unit_text
    assert "ExecStart=/opt/vllm/.venv/bin/python3 -c 'import torch'" in text
    assert "ExecStartPre=/usr/bin/nvidia-smi -pm 1" in text


def test_a_rollback_to_content_no_one_approved_needs_a_second_person(operator, hand_written):
    """Revision 1 ran a second server on 0.0.0.0 with --trust-remote-code from an earlier
    ExecStart=; revision 2 had dropped that line. Going back writes it again: that is a change
    to what runs, and it waits for an approver like a swap."""
    host, deployment = hand_written
    hidden = (
        "ExecStart=/opt/vllm/.venv/bin/vllm serve /models/other --host 0.0.0.0 "
        "--trust-remote-code --port 8001\n"
    )
    warm_up = "ExecStart=/opt/vllm/.venv/bin/python3 -c 'import torch'\n"
    first = HAND_WRITTEN.replace(warm_up, hidden)
    revisions.deployment_current_revision(deployment, snapshot_with_unit(host, first))
    second = request(operator, deployment, "restart", f.make_snapshot(host))
    rev1 = second.from_revision
    ChangeRequest.objects.filter(pk=second.pk).update(status="succeeded")
    content = revisions.RevisionContent(rev1.model, 8, 262144, (), first.replace(hidden, ""))
    change = ChangeRequest.objects.get(pk=second.pk)
    change.from_revision = rev1
    rev2 = revisions.revision_create(
        deployment=deployment, content=content, number=2, created_by="otto", change=change
    )
    change.save()
    Deployment.objects.filter(pk=deployment.pk).update(current_revision=rev2)
    deployment.refresh_from_db()
    back = request(operator, deployment, "rollback", f.make_snapshot(host))
    assert back.target_revision == rev1
    assert back.status == ChangeStatus.PENDING_APPROVAL
    assert any(
        "[Service] ExecStart= (besides the engine's)" in why and "--trust-remote-code" in why
        for why in back.params["approval_because"]
    ), back.params["approval_because"]


def test_the_revision_comparison_lists_what_needs_review(hand_written) -> None:
    host, deployment = hand_written
    rev1 = revisions.deployment_current_revision(deployment, snapshot_with_unit(host, HAND_WRITTEN))
    content = revisions.RevisionContent(
        rev1.model, 8, 262144, (), HAND_WRITTEN.replace("User=vllm", "User=root")
    )
    rev2 = revisions.revision_create(
        deployment=deployment, content=content, number=2, created_by="otto"
    )
    review = comparison.unit_review(rev1, rev2)
    assert review == ["[Service] User=: vllm → root (changes whom the engine runs as)"]


def test_a_drop_in_that_decides_what_runs_blocks_a_rewrite_naming_its_line(operator, hand_written):
    host, deployment = hand_written
    drop_in = (f"/etc/systemd/system/{UNIT}.d/override.conf", "[Service]\nUser=root\n")
    with pytest.raises(services.ChangeRefused) as refused:
        request(operator, deployment, "redeploy", snapshot_with_unit(host, HAND_WRITTEN, drop_in))
    assert "override.conf" in refused.value.message and "User=root" in refused.value.message


def test_a_harmless_drop_in_does_not_block(operator, hand_written):
    host, deployment = hand_written
    drop_in = (f"/etc/systemd/system/{UNIT}.d/limits.conf", "[Service]\nLimitNOFILE=65536\n")
    change = request(
        operator, deployment, "redeploy", snapshot_with_unit(host, HAND_WRITTEN, drop_in)
    )
    assert change.status == ChangeStatus.QUEUED


# --- where the server listens ----------------------------------------------------------------


def test_a_swap_of_a_unit_without_host_keeps_the_engines_default(operator, hand_written, catalog):
    host, deployment = hand_written
    change = request(
        operator, deployment, "model_swap", snapshot_with_unit(host, HAND_WRITTEN),
        model=catalog["INT4"],
    )  # fmt: skip
    plan = change.target_revision.plan
    assert plan.host is None and "--host" not in change.target_revision.unit_text
    assert not any("bind address" in why for why in change.params["approval_because"])
    deployment.refresh_from_db()
    assert deployment.bind_address == ""
    assert change.from_revision.bind_address == change.target_revision.bind_address == ""


def test_a_swap_keeps_an_adopted_bind_address(operator, hand_written, catalog):
    host, deployment = hand_written
    text = HAND_WRITTEN.replace("--port 8000", "--port 8000 --host 0.0.0.0")
    change = request(
        operator, deployment, "model_swap", snapshot_with_unit(host, text), model=catalog["INT4"]
    )
    assert change.target_revision.plan.host == "0.0.0.0"
    assert not any("bind address" in why for why in change.params["approval_because"])


def test_a_redeploy_keeps_the_parallelism_and_memory_share_an_adopted_unit_set(
    operator, hand_written
):
    host, deployment = hand_written
    text = HAND_WRITTEN.replace(
        "--tensor-parallel-size 8",
        "--tensor-parallel-size 4 --pipeline-parallel-size 2 --gpu-memory-utilization 0.95",
    )
    change = request(operator, deployment, "redeploy", snapshot_with_unit(host, text))
    plan = change.target_revision.plan
    assert (plan.tensor_parallel_size, plan.pipeline_parallel_size) == (4, 2)
    assert plan.memory_fraction == 0.95
    assert change.params["approval_because"] == []


def test_a_unit_the_control_plane_wrote_from_an_adopted_json_flag_can_be_changed_again(
    operator, hand_written
):
    """The adopted flags become the deployment's once a change succeeds; a JSON value there is
    what the host ran, not something typed, and must not refuse every later change."""
    from deployments.execution import runner

    host, deployment = hand_written
    text = HAND_WRITTEN.replace(
        "--port 8000", """--port 8000 --speculative-config '{"method": "ngram"}'"""
    )
    redeploy = request(operator, deployment, "redeploy", snapshot_with_unit(host, text))
    assert redeploy.target_revision.plan.flags["--speculative-config"] == '{"method": "ngram"}'
    ChangeRequest.objects.filter(pk=redeploy.pk).update(status="succeeded")
    redeploy.refresh_from_db()
    runner._apply_revision_to_deployment(redeploy)
    deployment.refresh_from_db()
    restart = request(operator, deployment, "restart", f.make_snapshot(host))
    assert restart.status == ChangeStatus.QUEUED
