"""Rolling back two revisions on a simulated host: the job writes the chosen revision's exact
bytes (checked on the host's own file), serves its model, and makes it the current revision;
the approval it waited for was the one its content needs."""

from __future__ import annotations

import pytest

from controlplane.audit.models import AuditEvent
from deployments import services
from deployments.choices import ChangeStatus
from deployments.execution import runner
from deployments.models import ChangeRequest, Deployment, DeploymentRevision, ModelArtifact
from hosts import services as host_services
from hosts.models import Host
from tests.fleet import register

pytestmark = pytest.mark.integration
UNIT = "vllm-kimi-k25.service"
PATH = f"/etc/systemd/system/{UNIT}"


def probe(host: Host):
    snapshot = host_services.host_probe(host=Host.objects.get(pk=host.pk), trigger="manual")
    assert snapshot.status == "ok", snapshot.error
    return snapshot


def run(change: ChangeRequest) -> ChangeRequest:
    runner.change_execute(change_id=change.pk)
    change.refresh_from_db()
    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    return change


def request(operator, host: Host, kind: str, **kwargs) -> ChangeRequest:
    return services.change_request_create(
        user=operator, deployment=Deployment.objects.get(host=host), kind=kind,
        snapshot=probe(host), reason="compare the builds", **kwargs,
    )  # fmt: skip


def approved(change: ChangeRequest, approver) -> ChangeRequest:
    assert change.status == ChangeStatus.PENDING_APPROVAL
    return services.change_request_approve(
        change=change, approver=approver, snapshot=probe(change.host), reason="reviewed the diff"
    )


@pytest.fixture
def fleet(db, make_fleet):
    fleet = register(make_fleet(1, unit_styles={"gpu-01": "envfile"}))
    probe(fleet.host("gpu-01"))
    return fleet


def on_host(fleet) -> str:
    return fleet.state("gpu-01")["unit_files"][PATH]["content"]


def test_two_back_to_another_model_waits_for_approval_and_writes_its_exact_bytes(
    fleet, operator, approver
):
    host = fleet.host("gpu-01")
    original = on_host(fleet)
    int4 = ModelArtifact.objects.get(path__endswith="K2.5-INT4")
    run(approved(request(operator, host, "model_swap", model=int4), approver))
    run(request(operator, host, "redeploy", extra_args=["--max-num-seqs=64"]))
    revisions = {r.number: r for r in DeploymentRevision.objects.filter(number__isnull=False)}
    assert sorted(revisions) == [1, 2, 3]
    assert "--max-num-seqs=64" in on_host(fleet) and "Kimi-K2.5-INT4" in on_host(fleet)

    back = request(operator, host, "rollback", revision=revisions[1])
    assert any(why.startswith("model: ") for why in back.params["approval_because"])
    back = run(approved(back, approver))

    assert on_host(fleet) == revisions[1].unit_text == original  # byte for byte
    deployment = Deployment.objects.get(host=host)
    assert deployment.current_revision_id == revisions[1].pk
    assert deployment.model == revisions[1].model
    served = probe(host).state().server(UNIT)  # what the server says it loaded
    assert served.model_roots == [revisions[1].plan.model] == ["nvidia/Kimi-K2.5-NVFP4"]
    assert not DeploymentRevision.objects.filter(number=4).exists()  # nothing new was written
    requested = AuditEvent.objects.get(action="change.requested", target_id=str(back.pk))
    assert (requested.data["from_revision"], requested.data["target_revision"]) == (3, 1)
    step = back.steps.get(name__startswith="write unit file")
    assert step.name == "write unit file (revision 1)"


def test_two_back_within_harmless_flags_goes_without_a_second_person(db, make_fleet, operator):
    fleet = register(make_fleet(1))
    host = fleet.host("gpu-01")
    original = on_host(fleet)
    run(request(operator, host, "redeploy", extra_args=["--max-num-seqs=64"]))
    run(request(operator, host, "redeploy", extra_args=["--max-num-seqs=32"]))
    assert "--max-num-seqs=32" in on_host(fleet)
    first = DeploymentRevision.objects.get(number=1)
    back = request(operator, host, "rollback", revision=first)
    assert (back.needs_approval, back.status) == (False, ChangeStatus.QUEUED)
    run(back)
    assert on_host(fleet) == first.unit_text == original
    assert Deployment.objects.get(host=host).current_revision_id == first.pk
