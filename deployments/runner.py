"""Executing a change request as logged steps, under a fenced host lease.

Lifecycle: queued -> running -> succeeded | failed | rolled_back | drifted | cancelled |
interrupted. A job never ends `running`: if its worker dies, recover_interrupted() marks it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from controlplane.audit import context as audit_context
from controlplane.audit import services as audit
from controlplane.clock import SYSTEM_CLOCK, Clock
from hosts import commands, parsers
from hosts import services as host_services
from hosts.choices import ProbeTrigger, SnapshotStatus
from hosts.ssh import CommandResult, SSHFailure
from hosts.state import UnitState

from . import lease as leases
from . import services
from .choices import REVISION_KINDS, SERVING_KINDS, ChangeKind, ChangeStatus, StepStatus
from .drift import execution_drift
from .lease import LeaseLost
from .models import ChangeRequest, Deployment, DeploymentRevision, JobStep

MAX_OUTPUT_CHARS = 32 * 1024


class JobEnded(Exception):
    """Stops the job with a final status and a reason for people to read."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class VerificationFailed(Exception):
    """The change was made but the server did not come back healthy and coherent."""


class Job:
    def __init__(self, change: ChangeRequest, clock: Clock = SYSTEM_CLOCK) -> None:
        self.change = change
        self.host = change.host
        self.deployment = change.deployment
        self.clock = clock
        self.lease = leases.Lease(change, clock)
        # The port the written unit listens on: the revision's, not the deployment row's, which
        # an administrator may have edited since the decision.
        revision = change.target_revision or change.from_revision
        self.port = revision.port if revision is not None else self.deployment.port
        self.seq = change.steps.count()
        self.destructive_started = False

    # --- lease and fencing ----------------------------------------------------------------

    def take_lease(self) -> None:
        try:
            self.lease.take()
        except leases.LeaseTaken as exc:
            raise JobEnded(ChangeStatus.FAILED, str(exc)) from exc

    def fence(self) -> None:
        """Renew the lease if, and only if, it is still ours; otherwise stop acting at once."""
        self.lease.renew()

    def release_lease(self) -> None:
        self.lease.release()

    # --- steps ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[JobStep]:
        self._check_cancel()
        self.seq += 1
        step = JobStep.objects.create(
            change=self.change,
            seq=self.seq,
            name=name,
            status=StepStatus.RUNNING,
            started_at=timezone.now(),
        )
        try:
            yield step
        except BaseException as exc:
            step.status = StepStatus.FAILED
            if not step.output:
                step.output = str(exc)[:MAX_OUTPUT_CHARS]
            self._close(step)
            raise
        else:
            step.status = StepStatus.SUCCEEDED
            self._close(step)

    def _close(self, step: JobStep) -> None:
        step.finished_at = timezone.now()
        with transaction.atomic():
            step.save(update_fields=["status", "output", "command", "exit_status", "finished_at"])
            audit.record(
                action="change.step",
                target=self.change,
                host=self.host,
                snapshot=self.change.snapshot,
                correlation_id=self.change.correlation_id,
                data={
                    "step": step.seq,
                    "name": step.name,
                    "status": step.status,
                    "command": step.command,
                    "exit_status": step.exit_status,
                    "seconds": step.duration_seconds,
                },
            )

    def _check_cancel(self) -> None:
        # Once a destructive command has run, the job finishes and verifies (or rolls back)
        # rather than leave the host half-changed.
        if self.destructive_started:
            return
        if ChangeRequest.objects.filter(pk=self.change.pk, cancel_requested=True).exists():
            raise JobEnded(ChangeStatus.CANCELLED, "cancelled between steps")

    def ssh(
        self,
        step: JobStep,
        argv: list[str],
        *,
        stdin: str | None = None,
        timeout: float | None = None,
    ) -> CommandResult:
        """Run one command under the lease: fenced before it starts, renewed while it runs."""
        self.fence()
        line = host_services.command_line_for(self.host, argv)
        step.command = f"{step.command}\n{line}".strip()
        result = host_services.host_run(
            host=self.host,
            argv=argv,
            stdin=stdin,
            timeout=min(timeout or settings.JOB_COMMAND_TIMEOUT_SECONDS, _longest_command()),
            heartbeat=self.lease.renew,
            heartbeat_every=leases.heartbeat_every(),
        )
        step.exit_status = result.exit_status
        step.output = (step.output + result.stdout + result.stderr)[-MAX_OUTPUT_CHARS:]
        return result

    def run_or_fail(self, step: JobStep, argv: list[str], **kwargs: Any) -> CommandResult:
        result = self.ssh(step, argv, **kwargs)
        if result.exit_status != 0:
            raise VerificationFailed(f"`{commands.join(argv)}` exited {result.exit_status}")
        return result

    # --- the job ---------------------------------------------------------------------------

    def run(self) -> None:
        change = self.change
        # An approval rests on the approver's own snapshot, checked to be materially the same as
        # the request's; that newer one is what must still be fresh now.
        approval = services.approval_valid(change) if change.needs_approval else None
        basis = approval.snapshot if approval is not None else change.snapshot
        with self.step("check the snapshot is still fresh"):
            try:
                host_services.snapshot_require_fresh(snapshot=basis, host=self.host)
            except host_services.SnapshotNotUsable as exc:
                raise JobEnded(ChangeStatus.FAILED, f"refused at execution start: {exc}") from exc
        if change.needs_approval:
            with self.step("check the approval"):
                if change.params_digest != services.change_params_digest(change):
                    raise JobEnded(ChangeStatus.FAILED, "the parameters changed after approval")
                if approval is None:
                    raise JobEnded(
                        ChangeStatus.FAILED, "no valid approval: it expired or was voided"
                    )
        with self.step("take the host lease"):
            self.take_lease()
        with self.step("re-probe and compare with the decided snapshot") as step:
            before = self.probe()
            ChangeRequest.objects.filter(pk=change.pk).update(before_snapshot=before)
            if before.status != SnapshotStatus.OK:
                raise JobEnded(
                    ChangeStatus.FAILED,
                    f"could not re-probe the host: {before.status} {before.error}",
                )
            drift = execution_drift(change=change, basis=basis, current=before)
            if drift:
                step.output = json.dumps(drift, indent=1)
                ChangeRequest.objects.filter(pk=change.pk).update(drift_report=drift)
                raise JobEnded(ChangeStatus.DRIFTED, "the host drifted since the decision")
        try:
            self.apply()
        except VerificationFailed as failure:
            if change.kind in REVISION_KINDS and change.from_revision is not None:
                self.restore(str(failure))
            raise JobEnded(ChangeStatus.FAILED, str(failure)) from failure

    def apply(self) -> None:
        kind = self.change.kind
        target = self.change.target_revision
        if kind in REVISION_KINDS:
            assert target is not None
            self.write_revision(target)
            self.systemctl("restart")
        elif kind == ChangeKind.STOP:
            self.systemctl("stop")
            self.wait_inactive()
        else:
            self.systemctl("start" if kind == ChangeKind.START else "restart")
        revision = target or self.change.from_revision
        if kind in SERVING_KINDS and revision is not None:
            self.wait_healthy()
            self.smoke(revision)
            if self.change.params.get("benchmark"):
                self.benchmark(revision)
        self.verify_after(revision)

    def write_revision(self, revision: DeploymentRevision) -> None:
        unit_file = commands.write_unit_file(self.deployment.unit)
        with self.step(f"write unit file (revision {revision.number})") as step:
            self.destructive_started = True
            self.run_or_fail(step, unit_file, stdin=revision.unit_text)
        with self.step("systemctl daemon-reload") as step:
            self.run_or_fail(step, commands.daemon_reload())

    def systemctl(self, action: str) -> None:
        with self.step(f"systemctl {action}") as step:
            self.destructive_started = True
            self.run_or_fail(step, commands.unit_action(action, self.deployment.unit))

    def _unit_state(self, step: JobStep) -> UnitState | None:
        result = self.ssh(step, commands.unit_show(self.deployment.unit))
        try:
            return parsers.parse_systemctl_show(result.stdout, self.deployment.unit)
        except parsers.ParseError:
            return None

    def wait_inactive(self) -> None:
        with self.step("wait for the service to stop") as step:
            deadline = self.clock.monotonic() + 120
            while self.clock.monotonic() < deadline:
                state = self._unit_state(step)
                if state is not None and state.active_state in {"inactive", "failed"}:
                    return
                self.clock.sleep(settings.HEALTH_POLL_SECONDS)
            raise VerificationFailed("the service did not stop within 120 s")

    def wait_healthy(self) -> None:
        timeout = self.deployment.load_timeout_seconds
        with self.step(f"wait for /health (up to {timeout} s)") as step:
            deadline = self.clock.monotonic() + timeout
            while True:
                self._check_cancel()
                state = self._unit_state(step)
                if state is not None and state.active_state == "failed":
                    journal = self.ssh(step, commands.unit_journal(self.deployment.unit, 40))
                    step.output = journal.stdout[-MAX_OUTPUT_CHARS:]
                    raise VerificationFailed("the service failed while starting (journal attached)")
                health = self.ssh(step, commands.http_get(self.port, "/health"))
                if parsers.parse_http(health.stdout).status == 200:
                    step.output = "healthy"
                    return
                if self.clock.monotonic() >= deadline:
                    raise VerificationFailed(f"/health did not answer 200 within {timeout} s")
                self.clock.sleep(settings.HEALTH_POLL_SECONDS)

    def _complete(
        self, step: JobStep, revision: DeploymentRevision, max_tokens: int
    ) -> dict[str, Any]:
        body = json.dumps(
            {
                "model": revision.model.served_name,
                "prompt": revision.model.smoke_prompt,
                "max_tokens": max_tokens,
                "temperature": 0,
            }
        )
        limit = settings.JOB_COMMAND_TIMEOUT_SECONDS
        result = self.ssh(
            step,
            commands.completion_request(self.port, body, max_seconds=limit - 5),
            timeout=limit,
        )
        http = parsers.parse_http(result.stdout)
        if http.status != 200:
            raise VerificationFailed(
                f"completion answered HTTP {http.status}: {http.error or http.body[:200]}"
            )
        try:
            payload = json.loads(http.body)
            text = payload["choices"][0]["text"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise VerificationFailed(
                "the completion response is not valid JSON of the expected shape"
            ) from exc
        return {"text": str(text), "usage": payload.get("usage") or {}}

    def smoke(self, revision: DeploymentRevision) -> None:
        expect = revision.model.smoke_expect
        with self.step(f"smoke completion must contain {expect!r}") as step:
            answer = self._complete(step, revision, 32)
            step.output = f"prompt: {revision.model.smoke_prompt!r}\nanswer: {answer['text']!r}"
            if expect.lower() not in answer["text"].lower():
                raise VerificationFailed(
                    f"incoherent: the smoke completion does not contain {expect!r}"
                )

    def benchmark(self, revision: DeploymentRevision, concurrency: int = 4) -> None:
        with self.step(f"throughput: 1 stream and {concurrency} concurrent") as step:
            started = self.clock.monotonic()
            tokens = sum(
                int(self._complete(step, revision, 64)["usage"].get("completion_tokens") or 0)
                for _ in range(3)
            )
            single = tokens / max(1e-6, self.clock.monotonic() - started)
            from concurrent.futures import ThreadPoolExecutor

            started = self.clock.monotonic()
            with ThreadPoolExecutor(concurrency) as pool:
                answers = list(
                    pool.map(lambda _: self._complete(step, revision, 64), range(concurrency))
                )
            total = sum(int(a["usage"].get("completion_tokens") or 0) for a in answers)
            many = total / max(1e-6, self.clock.monotonic() - started)
            result = {
                "single_stream_tokens_per_s": round(single, 1),
                "concurrent_tokens_per_s": round(many, 1),
                "concurrency": concurrency,
            }
            step.output = json.dumps(result)
            if revision.benchmark is None:
                revision.benchmark = result
                revision.save(update_fields=["benchmark"])

    def verify_after(self, revision: DeploymentRevision | None) -> None:
        with self.step("post-change snapshot") as step:
            after = self.probe()
            ChangeRequest.objects.filter(pk=self.change.pk).update(after_snapshot=after)
            unit = (after.parsed.get("deployments") or {}).get(self.deployment.unit) or {}
            active = (unit.get("unit") or {}).get("active_state")
            served = (unit.get("server") or {}).get("models") or []
            roots = (unit.get("server") or {}).get("model_roots") or []
            step.output = f"snapshot #{after.pk}: {active}, serving {served or 'nothing'} {roots}"
            if self.change.kind == ChangeKind.STOP:
                if active not in {"inactive", "failed"}:
                    raise VerificationFailed(f"the service is {active} after stop")
                return
            if revision is None:
                return
            if revision.model.served_name not in served:
                raise VerificationFailed(
                    f"the host serves {served or 'nothing'}, not {revision.model.served_name}"
                )
            if roots and revision.model.path not in roots:
                raise VerificationFailed(f"the server loaded {roots}, not {revision.model.path}")

    def restore(self, why: str) -> None:
        """Put the previous revision back and verify it; ends the job rolled_back or failed."""
        previous = self.change.from_revision
        assert previous is not None
        audit.record(
            action="change.rollback_started",
            target=self.change,
            host=self.host,
            snapshot=self.change.snapshot,
            correlation_id=self.change.correlation_id,
            data={"why": why, "to_revision": previous.number},
        )
        try:
            self.write_revision(previous)
            self.systemctl("restart")
            self.wait_healthy()
            self.smoke(previous)
            self.verify_after(previous)
        except (VerificationFailed, SSHFailure) as exc:
            raise JobEnded(
                ChangeStatus.FAILED,
                f"{why}; restoring revision {previous.number} failed too: {exc}",
            ) from exc
        raise JobEnded(
            ChangeStatus.ROLLED_BACK,
            f"{why}; restored revision {previous.number}, verified healthy",
        )

    def probe(self) -> Any:
        with audit_context.acting(correlation_id=self.change.correlation_id):
            self.fence()
            return host_services.host_probe(
                host=self.host,
                trigger=ProbeTrigger.JOB,
                heartbeat=self.lease.renew,
                heartbeat_every=leases.heartbeat_every(),
            )


def _apply_revision_to_deployment(change: ChangeRequest) -> None:
    revision = change.target_revision
    if change.kind not in REVISION_KINDS or revision is None:
        return
    deployment = Deployment.objects.select_for_update().get(pk=change.deployment_id)
    deployment.current_revision = revision
    deployment.model = revision.model
    deployment.tensor_parallel_size = revision.tensor_parallel_size
    deployment.max_model_len = revision.max_model_len
    deployment.extra_args = revision.extra_args
    deployment.save(
        update_fields=[
            "current_revision",
            "model",
            "tensor_parallel_size",
            "max_model_len",
            "extra_args",
        ]
    )


def _end(change: ChangeRequest, status: str, reason: str) -> bool:
    """Record the outcome if the job still owns the row (a recovery may have ended it)."""
    with transaction.atomic():
        ended = ChangeRequest.objects.filter(pk=change.pk, status=ChangeStatus.RUNNING).update(
            status=status, status_reason=reason[:4000], finished_at=timezone.now()
        )
        if not ended:
            return False
        if status == ChangeStatus.SUCCEEDED:
            _apply_revision_to_deployment(change)
        change.refresh_from_db()
        audit.record(
            action=f"change.{status}",
            target=change,
            host=change.host,
            snapshot=change.snapshot,
            correlation_id=change.correlation_id,
            data={
                "reason": reason,
                "drift": change.drift_report or None,
                "before_snapshot": change.before_snapshot_id,
                "after_snapshot": change.after_snapshot_id,
            },
        )
    return True


def change_execute(*, change_id: int) -> ChangeRequest | None:
    """Run one queued change. Safe to call twice: only the caller that claims it runs it."""
    now = timezone.now()
    claimed = ChangeRequest.objects.filter(pk=change_id, status=ChangeStatus.QUEUED).update(
        status=ChangeStatus.RUNNING, started_at=now
    )
    if not claimed:
        return None
    change = ChangeRequest.objects.select_related(
        "host", "deployment", "snapshot", "from_revision__model", "target_revision__model"
    ).get(pk=change_id)
    job = Job(change)
    with audit_context.acting(correlation_id=change.correlation_id):
        audit.record(
            action="change.started",
            target=change,
            host=change.host,
            snapshot=change.snapshot,
            correlation_id=change.correlation_id,
        )
        try:
            job.run()
            _end(change, ChangeStatus.SUCCEEDED, "verified healthy and coherent")
        except JobEnded as ended:
            _end(change, ended.status, ended.reason)
        except LeaseLost as lost:
            _end(change, ChangeStatus.INTERRUPTED, str(lost))
        except SSHFailure as failure:
            _end(change, ChangeStatus.FAILED, f"SSH: {failure.message}")
        except commands.UnsafeCommand as refused:  # a row that bypassed validation
            _end(change, ChangeStatus.FAILED, f"nothing sent: {refused}")
        except Exception as exc:  # keep the job out of `running`, with the error on the row
            _end(change, ChangeStatus.FAILED, f"internal error: {type(exc).__name__}: {exc}")
            raise
        finally:
            job.release_lease()
    change.refresh_from_db()
    return change


def recover_interrupted(now: dt.datetime | None = None) -> list[int]:
    """Mark jobs whose heartbeat stopped as interrupted and free their host.

    A running job is left alone while its lease is live: the holder renews it every quarter
    lease, also during a long command. A job that claimed its row but never took the lease is
    given one lease length to do so.
    """
    now = now or timezone.now()
    recovered = []
    running = ChangeRequest.objects.filter(status=ChangeStatus.RUNNING).select_related("host")
    for change in running:
        if not leases.heartbeat_stopped(change, now):
            continue
        with transaction.atomic():
            ended = ChangeRequest.objects.filter(pk=change.pk, status=ChangeStatus.RUNNING).update(
                status=ChangeStatus.INTERRUPTED,
                status_reason="the worker's heartbeat stopped (killed or partitioned)",
                finished_at=now,
            )
            if not ended:
                continue
            released = leases.lease_free(change=change)
            audit.record(
                action="change.interrupted",
                target=change,
                host=change.host,
                snapshot=change.snapshot,
                correlation_id=change.correlation_id,
                data={"lease_released": released},
            )
        recovered.append(change.pk)
    return recovered


def _longest_command() -> float:
    return float(max(settings.JOB_COMMAND_TIMEOUT_SECONDS, settings.SSH_COMMAND_TIMEOUT))
