"""A partial snapshot (say the GPU driver hiccuped): a stop or restart may go ahead with an
explicit, audited acknowledgement of what is unknown; a swap still needs the GPU facts."""

from __future__ import annotations

import pytest

from controlplane.audit.models import AuditEvent
from deployments import services
from deployments.choices import ChangeStatus
from deployments.execution import runner
from deployments.models import ModelArtifact
from hosts import services as host_services
from hosts.models import Host

pytestmark = pytest.mark.integration


def probe(host):
    host = Host.objects.select_related("credential").get(pk=host.pk)
    return host_services.host_probe(host=host, trigger="manual")


@pytest.fixture
def driver_down(registered_fleet):
    registered_fleet.set_fault("gpu-01", "gpu_driver_error")
    snapshot = probe(registered_fleet.deployments[0].host)
    assert snapshot.status == "partial", snapshot.error
    return registered_fleet, snapshot


def restart(user, fleet, snapshot, **kwargs):
    return services.change_request_create(
        user=user, deployment=fleet.deployments[0], kind="restart", snapshot=snapshot,
        reason="the driver hiccuped; restart the server", **kwargs,
    )  # fmt: skip


def test_a_restart_on_a_partial_snapshot_needs_the_acknowledgement(driver_down, operator):
    fleet, snapshot = driver_down
    with pytest.raises(services.ChangeRefused) as refused:
        restart(operator, fleet, snapshot)
    assert refused.value.details["needs_unknown_acknowledgement"]
    # One line per distinct error, naming every section it hit.
    [fact] = refused.value.details["unknown"]
    assert fact.startswith("gpus, compute_apps, gpu_details") and "NVIDIA-SMI has failed" in fact


def test_an_acknowledged_restart_runs_and_the_acknowledgement_is_audited(driver_down, operator):
    fleet, snapshot = driver_down
    change = restart(operator, fleet, snapshot, acknowledge_unknown=True)
    assert change.status == ChangeStatus.QUEUED
    event = AuditEvent.objects.get(action="change.unknown_acknowledged")
    assert event.data["unknown"] == change.params["acknowledged_unknown"]
    runner.change_execute(change_id=change.pk)
    change.refresh_from_db()
    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    assert any("systemctl restart" in c for c in fleet.command_log("gpu-01"))


def test_facts_that_were_unknown_are_not_drift_when_they_come_back(driver_down, operator):
    """The restart was the remedy: by the time the worker re-checks, the driver answers again.
    GPUs that were unknown are not "8 GPUs where there were none"; everything known still is."""
    fleet, snapshot = driver_down
    change = restart(operator, fleet, snapshot, acknowledge_unknown=True)
    fleet.set_fault("gpu-01", "gpu_driver_error", on=False)
    runner.change_execute(change_id=change.pk)
    change.refresh_from_db()
    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason


def test_known_facts_still_drift_on_a_partial_snapshot(driver_down, operator):
    fleet, snapshot = driver_down
    change = restart(operator, fleet, snapshot, acknowledge_unknown=True)
    fleet.set_fault("gpu-01", "gpu_driver_error", on=False)
    fleet.restart_unit("gpu-01")  # someone restarted it by hand since the decision
    runner.change_execute(change_id=change.pk)
    change.refresh_from_db()
    assert change.status == ChangeStatus.DRIFTED, change.status_reason
    assert "gpu_count" not in change.status_reason


def test_a_swap_on_a_partial_snapshot_is_refused_even_when_acknowledged(driver_down, operator):
    fleet, snapshot = driver_down
    with pytest.raises(services.ChangeRefused, match="needs a complete snapshot") as refused:
        services.change_request_create(
            user=operator, deployment=fleet.deployments[0], kind="model_swap",
            snapshot=snapshot, reason="INT4 is faster", acknowledge_unknown=True,
            model=ModelArtifact.objects.get(name="moonshotai/Kimi-K2.5", variant="INT4"),
        )  # fmt: skip
    assert refused.value.code == "stale"
