"""The unit file as it is: adopted byte for byte, rewritten only where a change is about, and
written back exactly on rollback (checked on the simulated host's own file)."""

from __future__ import annotations

import pytest

from deployments import services
from deployments.choices import ChangeStatus
from deployments.execution import runner
from deployments.models import Deployment, ModelArtifact
from hosts import services as host_services
from hosts.models import Host
from simulator import catalog
from tests.fleet import register

pytestmark = pytest.mark.integration
UNIT = "vllm-kimi-k25.service"
PATH = f"/etc/systemd/system/{UNIT}"


def probe(host: Host):
    snapshot = host_services.host_probe(host=Host.objects.get(pk=host.pk), trigger="manual")
    assert snapshot.status == "ok", snapshot.error
    return snapshot


def run(change):
    runner.change_execute(change_id=change.pk)
    change.refresh_from_db()
    return change


@pytest.fixture
def envfile_fleet(db, make_fleet):
    fleet = register(make_fleet(1, unit_styles={"gpu-01": "envfile"}))
    host = fleet.host("gpu-01")
    probe(host)  # reads the unit, then the environment file it names, in one probe
    return fleet, host


def test_the_first_revision_is_the_hosts_own_unit_read_with_its_variables(envfile_fleet, operator):
    fleet, host = envfile_fleet
    original = fleet.state("gpu-01")["unit_files"][PATH]["content"]
    deployment = Deployment.objects.get(host=host)
    change = services.change_request_create(
        user=operator, deployment=deployment, kind="restart", snapshot=probe(host),
        reason="pick up the new driver",
    )  # fmt: skip
    revision = change.from_revision
    assert revision.unit_text == original and revision.exact_bytes
    assert "EnvironmentFile=/etc/vllm/kimi-k25.env" in revision.unit_text
    assert revision.plan.model == "nvidia/Kimi-K2.5-NVFP4"  # ${MODEL}, from the file
    assert catalog.FAKE_HF_TOKEN not in str(revision.file_variables)
    # The plain restart verifies like with like: the repository id the server loaded.
    assert run(change).status == ChangeStatus.SUCCEEDED, change.status_reason


def test_a_swap_rewrites_the_command_line_and_a_rollback_writes_the_exact_bytes_back(
    envfile_fleet, operator, approver
):
    fleet, host = envfile_fleet
    original = fleet.state("gpu-01")["unit_files"][PATH]["content"]
    deployment = Deployment.objects.get(host=host)
    swap = services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap", snapshot=probe(host),
        reason="INT4 is faster", model=ModelArtifact.objects.get(path__endswith="K2.5-INT4"),
    )  # fmt: skip
    services.change_request_approve(
        change=swap, approver=approver, snapshot=probe(host), reason="fits; host idle"
    )
    assert swap.target_revision.number is None  # numbered once it reaches the host
    assert run(swap).status == ChangeStatus.SUCCEEDED, swap.status_reason
    swap.target_revision.refresh_from_db()
    assert swap.target_revision.number == 2
    swapped = fleet.state("gpu-01")["unit_files"][PATH]["content"]
    kept = [line for line in original.splitlines() if not line.startswith("ExecStart")]
    assert [line for line in swapped.splitlines() if not line.startswith("ExecStart")] == kept
    assert "/models/moonshotai/Kimi-K2.5-INT4" in swapped
    deployment.refresh_from_db()
    back = services.change_request_create(
        user=operator, deployment=deployment, kind="rollback", snapshot=probe(host),
        reason="compare against NVFP4 again",
    )  # fmt: skip
    services.change_request_approve(
        change=back, approver=approver, snapshot=probe(host), reason="model change reviewed"
    )
    assert run(back).status == ChangeStatus.SUCCEEDED, back.status_reason
    assert fleet.state("gpu-01")["unit_files"][PATH]["content"] == original
    assert "Environment=VLLM_USE_V1=1" in original
