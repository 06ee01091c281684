"""Right before acting, the worker re-checks everything the decision rested on: GPU processes
and who owns them, the fit in the memory they leave, and requests in flight.

The job runs in this process against the simulator over real SSH, so each test sees exactly
what was sent to the host.
"""

from __future__ import annotations

import pytest

from controlplane.audit.models import AuditEvent
from deployments import services
from deployments.choices import ChangeStatus
from deployments.execution import runner
from hosts import services as host_services
from hosts.models import Host

pytestmark = pytest.mark.integration
UNIT = "vllm-kimi-k25.service"
DESTRUCTIVE = ("systemctl restart", "systemctl stop", "systemctl start", "tee ", "daemon-reload")


def probe(host: Host):
    host = Host.objects.select_related("credential").get(pk=host.pk)
    snapshot = host_services.host_probe(host=host, trigger="manual")
    assert snapshot.status == "ok", snapshot.error
    return snapshot


def request(user, fleet, kind: str = "restart", **kwargs):
    deployment = fleet.deployments[0]
    return services.change_request_create(
        user=user, deployment=deployment, kind=kind, snapshot=probe(deployment.host),
        reason="pick up the new driver", **kwargs,
    )  # fmt: skip


def execute(change):
    runner.change_execute(change_id=change.pk)
    change.refresh_from_db()
    return change


def destructive_commands(fleet) -> list[str]:
    return [c for c in fleet.command_log("gpu-01") if any(d in c for d in DESTRUCTIVE)]


def test_a_foreign_gpu_process_since_the_decision_aborts_before_acting(registered_fleet, operator):
    change = request(operator, registered_fleet)
    # Someone started their own job on the deployment's GPUs after the request was made.
    registered_fleet.set_fault("gpu-01", "foreign_gpu_process")
    registered_fleet.clear_command_log("gpu-01")

    change = execute(change)

    assert change.status == ChangeStatus.DRIFTED, change.status_reason
    report = {d["field"]: d for d in change.drift_report}
    foreign = [f for f in report if f.startswith("gpu processes of ") and UNIT not in f]
    assert foreign, report
    assert report[foreign[0]]["before"] is None and len(report[foreign[0]]["after"]) == 8
    assert destructive_commands(registered_fleet) == []
    event = AuditEvent.objects.get(action="change.drifted", target_id=str(change.pk))
    assert event.data["drift"] == change.drift_report


def test_the_fit_is_recomputed_on_the_memory_other_processes_hold(registered_fleet, operator):
    registered_fleet.stop_unit("gpu-01")  # the GPUs are free when the start is decided
    change = request(operator, registered_fleet, kind="start")
    # Then someone's job takes 12 GiB of each GPU: less than vLLM's 92 % share stays free.
    registered_fleet.set_foreign_memory("gpu-01", 12288)
    registered_fleet.set_fault("gpu-01", "foreign_gpu_process")

    change = execute(change)

    fit = next(d for d in change.drift_report if d["field"].endswith(" fits"))
    assert fit["before"].startswith("fits")
    assert fit["after"].startswith("does not fit") and "held by pid" in fit["after"]


def test_requests_that_went_in_flight_since_the_decision_abort_the_job(registered_fleet, operator):
    change = request(operator, registered_fleet)  # idle when decided
    registered_fleet.set_inflight("gpu-01", 50)
    registered_fleet.clear_command_log("gpu-01")

    change = execute(change)

    assert change.status == ChangeStatus.DRIFTED, change.status_reason
    inflight = next(d for d in change.drift_report if "requests in flight" in d["field"])
    assert (inflight["before"], inflight["after"]) == (0.0, 50.0)
    assert "did not acknowledge" in inflight["why"]
    assert destructive_commands(registered_fleet) == []


def test_a_request_that_acknowledged_a_busy_server_goes_ahead(registered_fleet, operator):
    registered_fleet.set_inflight("gpu-01", 3)
    change = request(operator, registered_fleet, acknowledge_busy=True)
    registered_fleet.set_inflight("gpu-01", 50)

    change = execute(change)

    assert change.status == ChangeStatus.SUCCEEDED, (change.status_reason, change.drift_report)
    assert destructive_commands(registered_fleet)
