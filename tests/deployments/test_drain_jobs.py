"""Drained changes against the simulator over real SSH: the job takes the host out of its load
balancer's rotation, waits for what is in flight, acts only then (or at the deadline, if busy
servers were acknowledged), and puts the host back whatever became of the change.

The jobs run in this process, so each test sees exactly what reached the host and when; a test
that needs a deadline to pass gives the job a clock whose sleeps move time on at once.
"""

from __future__ import annotations

import datetime as dt
import time

import pytest
from django.utils import timezone

from controlplane.audit.models import AuditEvent
from controlplane.clock import Clock
from deployments import services
from deployments.choices import ChangeStatus, DrainHookKind, DrainState
from deployments.execution import runner
from deployments.models import ChangeRequest, Deployment, DrainHook, HostLease, ModelArtifact
from hosts import services as host_services
from hosts.models import Host
from tests import factories as f
from tests.fleet import register

pytestmark = pytest.mark.integration
UNIT = "vllm-kimi-k25.service"


class QuickClock(Clock):
    """Real time, but each sleep moves the job's monotonic clock on at once (a 30 s deadline
    passes in a few polls); `on_sleep` runs at every sleep, as something happening meanwhile."""

    def __init__(self, on_sleep=None) -> None:
        self.ahead = 0.0
        self.on_sleep = on_sleep

    def monotonic(self) -> float:
        return time.monotonic() + self.ahead

    def sleep(self, seconds: float) -> None:
        self.ahead += seconds
        if self.on_sleep is not None:
            self.on_sleep()
        time.sleep(0.02)


def probe(host: Host):
    host = Host.objects.select_related("credential").get(pk=host.pk)
    snapshot = host_services.host_probe(host=host, trigger="manual")
    assert snapshot.status == "ok", snapshot.error
    return snapshot


def request(user, fleet, kind="restart", hook="sim-lb", **kwargs) -> ChangeRequest:
    deployment = fleet.deployments[0]
    return services.change_request_create(
        user=user, deployment=deployment, kind=kind, snapshot=probe(deployment.host),
        reason="pick up the patched kernel", drain_hook=DrainHook.objects.get(name=hook),
        **kwargs,
    )  # fmt: skip


def execute(change: ChangeRequest, clock: Clock | None = None) -> ChangeRequest:
    runner.change_execute(change_id=change.pk, **({"clock": clock} if clock else {}))
    change.refresh_from_db()
    return change


def sent(fleet, *words: str) -> list[int]:
    """Where in the host's command log each of `words` was first sent (-1: never)."""
    log = fleet.command_log("gpu-01")
    return [next((i for i, line in enumerate(log) if word in line), -1) for word in words]


def step_names(change: ChangeRequest) -> list[str]:
    return [s.name for s in change.steps.all()]


@pytest.fixture
def fleet(make_fleet, db):
    return register(make_fleet(1))


def test_a_busy_host_drains_to_zero_and_then_restarts(fleet, operator) -> None:
    fleet.set_inflight("gpu-01", 6, 2)
    fleet.set_request_seconds(40)  # two real seconds at the tests' time scale
    change = request(operator, fleet)
    fleet.clear_command_log("gpu-01")

    change = execute(change)

    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    names = step_names(change)
    drain = names.index("drain: take the host out of rotation (sim-lb)")
    wait = names.index("wait for requests in flight to reach 0 (up to 300 s)")
    assert drain < wait < names.index("systemctl restart")
    assert names[-1] == "undrain: put the host back (sim-lb)"
    readings = change.steps.get(seq=wait + 1).output.splitlines()
    assert readings[0].endswith("8 in flight (6 running, 2 waiting)")
    assert readings[-1].endswith("0 in flight (0 running, 0 waiting)")
    out, restart, back = sent(
        fleet, "lb-drain out --backend gpu-01", "systemctl restart", "lb-drain in"
    )
    assert -1 < out < restart < back
    polls = fleet.command_log("gpu-01")[out:restart]
    assert any(line.startswith("curl") and "/metrics" in line for line in polls)
    assert fleet.in_rotation("gpu-01")
    assert change.drain_state == DrainState.UNDRAINED
    drained = AuditEvent.objects.get(action="change.drained", target_id=str(change.pk))
    assert drained.data["outcome"] == "idle" and drained.data["inflight_first"] == 8
    assert drained.correlation_id == change.correlation_id
    undrained = AuditEvent.objects.get(action="change.undrained", target_id=str(change.pk))
    assert undrained.data == {"hook": "sim-lb", "put_back": True, "why": None}
    ended = AuditEvent.objects.get(action="change.succeeded", target_id=str(change.pk))
    assert ended.data["drain"]["put_back"] is True
    steps = AuditEvent.objects.filter(action="change.step", correlation_id=change.correlation_id)
    hook_steps = [e.data for e in steps if e.data["name"].startswith("drain:")]
    assert [s["command"] for s in hook_steps] == [
        "/usr/local/bin/lb-drain out --backend gpu-01 2>&1"
    ]


def test_a_drain_that_times_out_without_acknowledgement_fails_and_undrains(fleet, operator) -> None:
    fleet.set_inflight("gpu-01", 3)
    fleet.set_request_seconds(10**6)  # these never finish
    change = request(operator, fleet, drain_deadline_seconds=30)
    fleet.clear_command_log("gpu-01")

    change = execute(change, QuickClock())

    assert change.status == ChangeStatus.FAILED
    assert change.status_reason == (
        "the drain deadline (30 s) passed with 3 requests still in flight, and the request did "
        "not acknowledge dropping them: nothing was stopped"
    )
    out, restart, back = sent(fleet, "lb-drain out", "systemctl restart", "lb-drain in")
    assert restart == -1 and -1 < out < back
    assert fleet.in_rotation("gpu-01") and change.drain_state == DrainState.UNDRAINED
    assert fleet.state("gpu-01")["units"][UNIT]["active_state"] == "active"
    drained = AuditEvent.objects.get(action="change.drained", target_id=str(change.pk))
    assert drained.data["outcome"] == "deadline_passed"
    assert not HostLease.objects.filter(holder__isnull=False).exists()


def test_a_drain_that_times_out_with_acknowledgement_goes_ahead_and_says_so(
    fleet, operator
) -> None:
    fleet.set_inflight("gpu-01", 3)
    fleet.set_request_seconds(10**6)
    change = request(operator, fleet, drain_deadline_seconds=30, acknowledge_busy=True)
    fleet.clear_command_log("gpu-01")

    change = execute(change, QuickClock())

    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    wait = change.steps.get(name__startswith="wait for requests in flight")
    assert wait.output.splitlines()[-1] == (
        "the deadline passed with 3 requests in flight; the request acknowledged dropping "
        "them: going ahead"
    )
    assert sent(fleet, "systemctl restart")[0] > -1
    drained = AuditEvent.objects.get(action="change.drained", target_id=str(change.pk))
    assert drained.data["outcome"] == "deadline_acknowledged"
    assert fleet.in_rotation("gpu-01")


def test_undrain_runs_after_a_failed_verification_and_its_restore(fleet, operator, approver):
    fleet.set_fault("gpu-01", "crash_on_start", models=["/models/moonshotai/Kimi-K2.5-INT4"])
    int4 = ModelArtifact.objects.get(name="moonshotai/Kimi-K2.5", variant="INT4")
    change = request(operator, fleet, kind="model_swap", model=int4)
    services.change_request_approve(
        change=change, approver=approver, snapshot=probe(fleet.hosts[0]), reason="fits"
    )

    change = execute(change)

    assert change.status == ChangeStatus.ROLLED_BACK, change.status_reason
    names = step_names(change)
    assert names[-1] == "undrain: put the host back (sim-lb)"
    assert names.index("snapshot of the failed state") < len(names) - 1
    assert change.steps.get(seq=len(names)).status == "succeeded"
    assert fleet.in_rotation("gpu-01") and change.drain_state == DrainState.UNDRAINED


def test_an_http_hook_is_called_from_the_host(fleet, operator) -> None:
    change = request(operator, fleet, hook="sim-lb-http")
    fleet.clear_command_log("gpu-01")
    change = execute(change)
    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    drain, back = sent(fleet, "/v1/backends/gpu-01/drain", "/v1/backends/gpu-01/undrain")
    assert -1 < drain < back
    assert fleet.command_log("gpu-01")[drain].startswith("curl -sS -X POST -m 30 --proto")
    assert fleet.in_rotation("gpu-01")


def test_a_failed_undrain_is_reported_not_hidden(fleet, operator) -> None:
    DrainHook.objects.create(
        name="wrong-backend", kind=DrainHookKind.HTTP,
        drain_url="http://127.0.0.1:9180/v1/backends/{host}/drain",
        undrain_url="http://127.0.0.1:9180/v1/backends/gpu-99/undrain",
    )  # fmt: skip
    change = execute(request(operator, fleet, hook="wrong-backend"))
    # The change itself worked: it stays succeeded, and says the host is still out.
    assert change.status == ChangeStatus.SUCCEEDED
    assert change.status_reason.endswith(
        "; the host is still out of rotation: putting it back with wrong-backend failed "
        "(POST http://127.0.0.1:9180/v1/backends/gpu-99/undrain answered HTTP 404)"
    )
    assert change.drain_state == DrainState.UNDRAIN_FAILED
    assert change.steps.last().status == "failed"
    assert not fleet.in_rotation("gpu-01")
    undrained = AuditEvent.objects.get(action="change.undrained", target_id=str(change.pk))
    assert undrained.data["put_back"] is False


def test_a_hook_edited_after_the_request_is_not_run(fleet, operator) -> None:
    change = request(operator, fleet)
    DrainHook.objects.filter(name="sim-lb").update(undrain_command="/usr/local/bin/lb-drain in")
    fleet.clear_command_log("gpu-01")
    change = execute(change)
    assert change.status == ChangeStatus.FAILED
    assert change.status_reason == (
        "the drain hook sim-lb changed after the request; request the change again: nothing "
        "was drained or changed"
    )
    assert sent(fleet, "lb-drain", "systemctl restart") == [-1, -1]
    assert change.drain_state == DrainState.NONE


def test_a_cancel_while_waiting_stops_the_job_and_undrains(fleet, operator) -> None:
    fleet.set_inflight("gpu-01", 2)
    fleet.set_request_seconds(10**6)
    change = request(operator, fleet)

    def cancel() -> None:
        ChangeRequest.objects.filter(pk=change.pk).update(cancel_requested=True)

    change = execute(change, QuickClock(on_sleep=cancel))
    assert change.status == ChangeStatus.CANCELLED
    assert step_names(change)[-1] == "undrain: put the host back (sim-lb)"
    assert sent(fleet, "systemctl restart") == [-1]
    assert fleet.in_rotation("gpu-01")


def test_recovery_says_a_dead_jobs_host_may_still_be_drained(operator, deployment, host):
    """A worker killed between the drain and the undrain: nothing may be sent without its
    lease, so the host stays out of rotation, and the interrupted event says so."""
    change = services.change_request_create(
        user=operator, deployment=deployment, kind="restart", snapshot=f.make_snapshot(host),
        reason="patch", drain_hook=DrainHook.objects.create(
            name="lb", kind=DrainHookKind.COMMAND, drain_command="/usr/local/bin/lb-drain out",
            undrain_command="/usr/local/bin/lb-drain in",
        ),
    )  # fmt: skip
    past = timezone.now() - dt.timedelta(hours=1)
    ChangeRequest.objects.filter(pk=change.pk).update(
        status=ChangeStatus.RUNNING, started_at=past, drain_state=DrainState.DRAINED
    )
    HostLease.objects.create(host=host, holder=change, fencing_token=1, expires_at=past)

    assert runner.recover_interrupted() == [change.pk]

    change.refresh_from_db()
    assert change.status == ChangeStatus.INTERRUPTED
    assert "the host may still be out of its load balancer's rotation" in change.status_reason
    event = AuditEvent.objects.get(action="change.interrupted", target_id=str(change.pk))
    assert event.data["drain"]["state"] == "drained" and event.data["drain"]["hook"] == "lb"


def test_a_redeploy_writes_the_drain_grace_and_a_stop_then_lets_requests_finish(
    fleet, operator
) -> None:
    deployment = fleet.deployments[0]
    Deployment.objects.filter(pk=deployment.pk).update(drain_grace_seconds=60)
    deployment.refresh_from_db()
    redeploy = services.change_request_create(
        user=operator,
        deployment=deployment,
        kind="redeploy",
        snapshot=probe(deployment.host),
        reason="let a stop drain",
    )
    redeploy = execute(redeploy)
    assert redeploy.status == ChangeStatus.SUCCEEDED, redeploy.status_reason
    assert not redeploy.needs_approval
    written, _, _ = fleet.run("gpu-01", f"systemctl cat --no-pager {UNIT}")
    assert "--shutdown-timeout 60" in written and "TimeoutStopSec=90" in written

    # No drain hook: the balancer keeps sending, but the engine itself drains on SIGTERM.
    fleet.set_inflight("gpu-01", 4)
    fleet.set_request_seconds(40)  # two real seconds
    deployment.refresh_from_db()
    stop = services.change_request_create(
        user=operator,
        deployment=deployment,
        kind="stop",
        snapshot=probe(deployment.host),
        reason="maintenance",
        acknowledge_busy=True,
    )
    stop = execute(stop)
    assert stop.status == ChangeStatus.SUCCEEDED, stop.status_reason
    waited = stop.steps.get(name="wait for the service to stop")
    assert waited.duration_seconds > 1.0  # it waited for the requests, not killed them
    journal = fleet.journal("gpu-01")
    assert not any("timed out. Killing." in line for line in journal)
    assert fleet.state("gpu-01")["units"][UNIT]["result"] == "success"
