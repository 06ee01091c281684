"""Change jobs end to end: real worker, real Redis, real SSH to the simulator."""

from __future__ import annotations

import time
import uuid

import pytest

from controlplane.audit.models import AuditEvent
from deployments import services
from deployments.choices import ACTIVE_JOB_STATUSES, ChangeStatus
from deployments.execution import runner
from deployments.models import ChangeRequest, HostLease, ModelArtifact
from hosts import services as host_services
from hosts.models import Host, HostHealth
from tests.fleet import register
from tests.waiting import wait_for_change, wait_until

pytestmark = pytest.mark.integration
UNIT = "vllm-kimi-k25.service"
DESTRUCTIVE = ("systemctl restart", "systemctl stop", "systemctl start", "tee ", "daemon-reload")


def probe(host):
    host = Host.objects.select_related("credential").get(pk=host.pk)
    snapshot = host_services.host_probe(host=host, trigger="manual")
    assert snapshot.status == "ok", snapshot.error
    return snapshot


def model(variant: str, name: str = "moonshotai/Kimi-K2.5") -> ModelArtifact:
    return ModelArtifact.objects.get(name=name, variant=variant)


def served(fleet, name: str = "gpu-01") -> tuple[list[str], str | None]:
    state = fleet.state(name)
    return state["models"], state["units"][UNIT]["model_path"]


def destructive_commands(fleet, name: str = "gpu-01") -> list[str]:
    return [c for c in fleet.command_log(name) if any(d in c for d in DESTRUCTIVE)]


def request_swap(operator, approver, fleet, variant="INT4", name="moonshotai/Kimi-K2.5"):
    deployment = fleet.deployments[0]
    change = services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap", snapshot=probe(deployment.host),
        reason="INT4 serves more tokens per second", model=model(variant, name),
    )  # fmt: skip
    assert change.status == ChangeStatus.PENDING_APPROVAL
    services.change_request_approve(
        change=change, approver=approver, snapshot=probe(deployment.host), reason="looks fine"
    )
    return change


def test_a_two_person_model_swap_end_to_end(make_fleet, celery_worker, operator, approver):
    fleet = register(make_fleet(1))
    change = wait_for_change(request_swap(operator, approver, fleet))
    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    assert served(fleet) == (["kimi-k2.5"], "/models/moonshotai/Kimi-K2.5-INT4")
    after = change.after_snapshot
    assert (
        "/models/moonshotai/Kimi-K2.5-INT4"
        in (after.parsed["deployments"][UNIT]["server"]["model_roots"])
    )
    deployment = change.deployment
    deployment.refresh_from_db()
    assert deployment.model == model("INT4")
    assert deployment.current_revision == change.target_revision
    names = [s.name for s in change.steps.all()]
    assert names[:4] == [
        "check the snapshot is still fresh",
        "check the approval",
        "take the host lease",
        "re-probe and compare with the decided snapshot",
    ]
    assert "systemctl daemon-reload" in names and "post-change snapshot" in names
    events = AuditEvent.objects.filter(correlation_id=change.correlation_id).order_by("seq")
    actions = [e.action for e in events]
    changes = [a for a in actions if a.startswith("change.")]
    assert changes[0] == "change.requested" and changes[-1] == "change.succeeded"
    assert "change.approved" in actions
    steps = [e for e in events if e.action == "change.step"]
    assert len(steps) == len(names)
    # Each step names the snapshot it rested on: the approver's for the checks of the
    # decision, then the job's re-probe, then the post-change snapshot.
    approved = change.approvals.get().snapshot_id
    rested = [(e.data["name"], e.snapshot_id) for e in steps]
    assert rested[:4] == [(names[0], approved), (names[1], approved), (names[2], approved),
                          (names[3], change.before_snapshot_id)]  # fmt: skip
    assert rested[-1] == ("post-change snapshot", after.pk)
    assert all(e.snapshot_age_seconds >= 0 for e in steps)
    assert any(e.data["command"].startswith("sudo -n tee --") for e in steps)
    probes = events.filter(action="probe.completed")
    assert probes.count() >= 2  # the re-probe and the post-change snapshot carry the thread
    assert not HostLease.objects.filter(holder__isnull=False).exists()


def test_the_verdict_during_a_swap_says_changing_never_failed(
    make_fleet, celery_worker, operator, approver
):
    """Sampled as the scheduled probes would, all through a real swap: the new unit file is
    written, the unit restarts and loads the new model, which serves before the job makes its
    revision the deployment's current one. Each is the change, not an outage: the verdict is
    `changing`, and no webhook says degraded."""
    from controlplane.notifications.events import notifications_for

    # 30 simulated seconds to load, 1.5 s of real time (tests/fleet.TEST_TIME_SCALE): long
    # enough for the probes below to find the model loading.
    fleet = register(make_fleet(1, load_seconds=30))
    host = fleet.host("gpu-01")
    change = request_swap(operator, approver, fleet)
    assert HostHealth.objects.get(host=host).verdict == "healthy"
    seen: list[tuple[str, list[str]]] = []
    while ChangeRequest.objects.get(pk=change.pk).status in ACTIVE_JOB_STATUSES:
        host_services.host_probe(host=Host.objects.get(pk=host.pk), trigger="schedule")
        row = HostHealth.objects.get(host=host)
        seen.append((row.verdict, [r["code"] for r in row.reasons]))
    change = wait_for_change(change)
    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    verdicts = [v for v, _ in seen]
    assert "failed" not in verdicts and "degraded" not in verdicts, seen
    assert "changing" in verdicts, seen
    loading = {"service_changing", "loading"} & {c for _, codes in seen for c in codes}
    assert loading, seen  # it was sampled while the unit restarted
    events = AuditEvent.objects.filter(action="host.verdict_changed", host_id=host.pk)
    assert [e.data["after"] for e in events.order_by("seq")] == ["changing", "healthy"]
    assert all(e.data["during_change"] == change.pk for e in events)
    assert [n for e in events for n in notifications_for(e)] == []
    assert HostHealth.objects.get(host=host).verdict == "healthy"


def test_drift_between_decision_and_execution_aborts_before_any_destructive_command(
    make_fleet, celery_worker, operator
):
    fleet = register(make_fleet(1))
    deployment = fleet.deployments[0]
    snapshot = probe(deployment.host)
    fleet.restart_unit("gpu-01")  # someone restarted it by hand: a new MainPID
    fleet.clear_command_log("gpu-01")
    change = services.change_request_create(
        user=operator, deployment=deployment, kind="restart", snapshot=snapshot, reason="patch"
    )
    change = wait_for_change(change)
    assert change.status == ChangeStatus.DRIFTED
    fields = {d["field"] for d in change.drift_report}
    assert f"{UNIT}.main_pid" in fields
    assert destructive_commands(fleet) == []
    event = AuditEvent.objects.get(action="change.drifted", target_id=str(change.pk))
    assert event.data["drift"] == change.drift_report


def test_a_service_that_crashes_on_start_is_rolled_back(
    make_fleet, celery_worker, operator, approver
):
    fleet = register(make_fleet(1))
    # The new build crashes on start; the one it replaces still starts fine.
    fleet.set_fault("gpu-01", "crash_on_start", models=["/models/moonshotai/Kimi-K2.5-INT4"])
    change = request_swap(operator, approver, fleet)
    change = wait_for_change(change)
    assert change.status == ChangeStatus.ROLLED_BACK, change.status_reason
    assert served(fleet) == (["kimi-k2.5"], "/models/moonshotai/Kimi-K2.5-NVFP4")
    journal_step = change.steps.filter(name__startswith="wait for /health", status="failed").first()
    assert journal_step is not None and "Traceback" in journal_step.output
    assert AuditEvent.objects.filter(action="change.rollback_started").exists()
    change.deployment.refresh_from_db()
    assert change.deployment.model == model("NVFP4")


def test_an_incoherent_model_is_rolled_back(make_fleet, celery_worker, operator, approver):
    fleet = register(make_fleet(1))
    fleet.set_fault("gpu-01", "incoherent", models=["/models/Qwen/Qwen3-235B-A22B-FP8"])
    change = request_swap(operator, approver, fleet, "FP8", "Qwen/Qwen3-235B-A22B")
    change = wait_for_change(change)
    assert change.status == ChangeStatus.ROLLED_BACK, change.status_reason
    assert "incoherent" in change.status_reason
    assert served(fleet) == (["kimi-k2.5"], "/models/moonshotai/Kimi-K2.5-NVFP4")


def test_a_worker_killed_mid_job_leaves_an_interrupted_job_and_a_free_host(
    make_fleet, tmp_path, operator, transactional_db, settings
):
    """Killed while it waits for the model to load: its heartbeat stops, and within one lease
    recovery marks the job interrupted and frees the host (measured on the real clock)."""
    from tests.workers import private_worker

    lease = 20  # the shortest the settings allow with 5 s command timeouts
    short = {"JOB_LEASE_SECONDS": str(lease), "JOB_COMMAND_TIMEOUT_SECONDS": "5"}
    settings.JOB_LEASE_SECONDS = lease
    fleet = register(make_fleet(1, load_seconds=60, time_scale=1.0))
    deployment = fleet.deployments[0]
    log = tmp_path / "worker.log"
    queue = f"test-kill-{uuid.uuid4().hex[:12]}"  # two runs may share a Redis
    with private_worker(queue, log, SSH_COMMAND_TIMEOUT="5", **short) as w:
        change = services.change_request_create(
            user=operator, deployment=deployment, kind="restart",
            snapshot=probe(deployment.host), reason="restart while loading",
        )  # fmt: skip
        wait_until(
            change.steps.filter(name__startswith="wait for /health").exists, explain=w.output
        )
        assert runner.recover_interrupted() == []  # alive: its heartbeat beats
        w.kill()
        killed = time.monotonic()
    change.refresh_from_db()
    assert change.status == ChangeStatus.RUNNING
    while runner.recover_interrupted() != [change.pk]:
        assert time.monotonic() - killed < lease + 2, "not recovered within one lease"
        time.sleep(0.5)
    change.refresh_from_db()
    assert change.status == ChangeStatus.INTERRUPTED
    assert HostLease.objects.get(host=deployment.host).holder is None
    assert AuditEvent.objects.filter(action="change.interrupted", target_id=str(change.pk)).exists()


def test_a_hostile_unit_name_that_bypassed_validation_never_reaches_the_host(
    make_fleet, celery_worker, operator
):
    from deployments.models import Deployment

    fleet = register(make_fleet(1))
    deployment = fleet.deployments[0]
    snapshot = probe(deployment.host)
    change = services.change_request_create(
        user=operator, deployment=deployment, kind="restart", snapshot=snapshot, reason="x"
    )
    # Written straight to the table, as a compromised admin or a bad migration might.
    Deployment.objects.filter(pk=deployment.pk).update(unit="x;reboot $(id).service")
    fleet.clear_command_log("gpu-01")
    change = wait_for_change(change)
    assert change.status == ChangeStatus.FAILED
    assert "refusing to send unit name" in change.status_reason
    assert not any("reboot" in line for line in fleet.command_log("gpu-01"))
    snapshot = host_services.host_probe(host=deployment.host, trigger="manual")
    assert snapshot.status == "error" and "refusing to send" in snapshot.error
