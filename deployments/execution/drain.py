"""Draining a host before a change's first destructive command, and putting it back after.

A change whose request chose a drain hook (its `drain` parameters) takes the host out of its
load balancer's rotation with the hook (`take_out`), then waits until the engine's requests in
flight, running plus waiting as the probe reads them from /metrics, reach zero
(`wait_for_idle`), re-reading every DRAIN_POLL_SECONDS under the job's lease. If the request's
deadline passes first, the job goes ahead only when the request acknowledged dropping what is
still running; otherwise it ends failed and nothing destructive is sent. After the change,
whatever became of it, the host is put back (`put_back`), and a failure to do so is reported
with the job's outcome, never hidden.

The hook the job runs is the row the request named, and only if it is still enabled and still
what it was when the request was made (its digest): the request, and any approval of it, bound
to that.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from hosts import commands, hook_commands, parsers
from hosts import services as host_services
from hosts.ssh import CommandResult, SSHFailure

from ..choices import ChangeStatus, DrainHookKind, DrainState
from ..models import ChangeRequest, DrainHook, JobStep
from .job import Job
from .lease import LeaseLost
from .outcomes import JobEnded

DRAIN_POLL_SECONDS = 2.0
# A hook's own timeout bounds curl or the command; the SSH round trip gets this much more.
_SSH_SLACK_SECONDS = 5


class HookFailed(Exception):
    """A drain or undrain call did not succeed (its exit status, or its HTTP status)."""


@dataclass
class Drained:
    """A host the job took out of rotation, and how to put it back."""

    hook: DrainHook
    values: dict[str, str]


def take_out(job: Job) -> Drained | None:
    """Run the drain hook the request chose (None: it chose none). A hook that fails ends the
    job failed, after an attempt to undo whatever it did."""
    plan = (job.change.params or {}).get("drain")
    if not plan:
        return None
    hook = _hook_as_requested(plan)
    try:
        values = hook_commands.hook_values(
            host=job.host.name, unit=job.deployment.unit, port=job.port
        )
    except commands.UnsafeCommand as exc:
        raise JobEnded(ChangeStatus.FAILED, f"drain: nothing sent: {exc}") from exc
    drained = Drained(hook, values)
    _set_state(job.change, DrainState.DRAINING)  # before the hook is sent: recovery reads it
    try:
        _call(job, drained, "drain")
    except (HookFailed, commands.UnsafeCommand) as exc:
        put_back(job, drained)
        raise JobEnded(ChangeStatus.FAILED, f"the drain hook {hook.name} failed: {exc}") from exc
    except (SSHFailure, LeaseLost):
        put_back(job, drained)  # it may have reached the host: try, and say how it went
        raise
    _set_state(job.change, DrainState.DRAINED)
    return drained


def _hook_as_requested(plan: dict[str, Any]) -> DrainHook:
    hook = DrainHook.objects.filter(pk=int(plan.get("hook") or 0)).first()
    name = plan.get("hook_name", "?")
    why = None
    if hook is None:
        why = f"the drain hook {name} was deleted after the request"
    elif not hook.enabled:
        why = f"the drain hook {name} was disabled after the request"
    elif hook.digest() != plan.get("hook_digest"):
        why = f"the drain hook {name} changed after the request; request the change again"
    if why is not None:
        raise JobEnded(ChangeStatus.FAILED, f"{why}: nothing was drained or changed")
    assert hook is not None
    return hook


def _call(job: Job, drained: Drained, action: str) -> None:
    """One hook call, as a step of its own (an undrain runs even when the job was cancelled)."""
    hook = drained.hook
    verb = "take the host out of rotation" if action == "drain" else "put the host back"
    with job.step(f"{action}: {verb} ({hook.name})", check_cancel=action == "drain") as step:
        argv = hook.argv(action, drained.values)
        result = job.shell.run(step, argv, timeout=hook.timeout_seconds + _SSH_SLACK_SECONDS)
        if result.exit_status != 0:
            raise HookFailed(f"`{commands.join(argv)}` exited {result.exit_status}")
        if hook.kind == DrainHookKind.HTTP:
            status = parsers.parse_http(result.stdout).status
            if status is None or not 200 <= status < 300:
                raise HookFailed(f"{argv[3]} {argv[-1]} answered HTTP {status or 'nothing'}")


def wait_for_idle(job: Job, drained: Drained) -> None:
    """Wait until nothing is in flight on the unit's server, or the request's deadline passes.
    Each reading is shown in the step as it is made (the change page follows it live)."""
    deadline = int(job.change.params["drain"]["deadline_seconds"])
    clock = job.clock
    with job.step(f"wait for requests in flight to reach 0 (up to {deadline} s)") as step:
        start = clock.monotonic()
        readings: list[str] = []
        first: float | None = None
        while True:
            job.journal.check_cancel()
            inflight, said = _inflight(job, step)
            elapsed = clock.monotonic() - start
            first = inflight if first is None else first
            readings.append(f"+{elapsed:.0f} s: {said}")
            _show(step, readings)
            if inflight == 0:
                _record_drained(job, drained, first, inflight, elapsed, "idle")
                return
            if elapsed >= deadline:
                break
            clock.sleep(min(DRAIN_POLL_SECONDS, deadline - elapsed))
        left = "an unknown number of" if inflight is None else f"{inflight:.0f}"
        if job.change.busy_acknowledged:
            readings.append(
                f"the deadline passed with {left} requests in flight; the request acknowledged "
                "dropping them: going ahead"
            )
            _show(step, readings)
            _record_drained(job, drained, first, inflight, elapsed, "deadline_acknowledged")
            return
        _record_drained(job, drained, first, inflight, elapsed, "deadline_passed")
        raise JobEnded(
            ChangeStatus.FAILED,
            f"the drain deadline ({deadline} s) passed with {left} requests still in flight, and "
            "the request did not acknowledge dropping them: nothing was stopped",
        )


def _inflight(job: Job, step: JobStep) -> tuple[float | None, str]:
    """Requests running plus waiting on the unit's server now, and how to say it; a server
    that is not running has none; None when the server did not say."""
    result = _quietly(job, step, commands.http_get(job.port, "/metrics"))
    answer = parsers.parse_http(result.stdout)
    if answer.status == 200:
        try:
            running, waiting, _ = parsers.parse_vllm_metrics(answer.body)
        except parsers.ParseError as exc:
            return None, f"unknown: /metrics could not be read ({exc})"
        if running is not None or waiting is not None:
            running, waiting = running or 0, waiting or 0
            total = running + waiting
            return total, f"{total:.0f} in flight ({running:.0f} running, {waiting:.0f} waiting)"
        return None, "unknown: /metrics does not say what is in flight"
    state = job.shell.unit_state(step, job.deployment.unit)
    if state is not None and state.active_state in {"inactive", "failed"}:
        return 0, f"0 in flight (the service is {state.active_state})"
    return None, f"unknown: /metrics answered {answer.status or 'nothing'}"


def _quietly(job: Job, step: JobStep, argv: list[str]) -> CommandResult:
    """Run a polling command: its line kept in the step once, its output not kept there."""
    command, output = step.command, step.output
    result = job.shell.run(step, argv)
    if host_services.command_line_for(job.host, argv) in command:
        step.command = command
    step.output = output
    return result


def _show(step: JobStep, readings: list[str]) -> None:
    step.output = "\n".join(readings[-200:])
    JobStep.objects.filter(pk=step.pk).update(output=step.output)


def _record_drained(
    job: Job,
    drained: Drained,
    first: float | None,
    last: float | None,
    seconds: float,
    outcome: str,
) -> None:
    _record(
        job,
        AuditAction.CHANGE_DRAINED,
        {
            "hook": drained.hook.name,
            "inflight_first": first,
            "inflight_last": last,
            "seconds": round(seconds, 1),
            "deadline_seconds": job.change.params["drain"]["deadline_seconds"],
            "outcome": outcome,
        },
    )


def put_back(job: Job, drained: Drained) -> None:
    """Put the host back in rotation: after the change, whatever became of it. Never raises;
    what happened is kept on the job (`drain_report`) for the final status to say."""
    why = None
    try:
        _call(job, drained, "undrain")
    except LeaseLost as exc:
        why = f"the job lost its lease before putting it back ({exc})"
    except SSHFailure as exc:
        why = f"SSH: {exc.message}"
    except (HookFailed, commands.UnsafeCommand) as exc:
        why = str(exc)
    except Exception as exc:  # the database or the broker went away: said, not raised
        why = f"{type(exc).__name__}: {exc}"
    state = DrainState.UNDRAINED if why is None else DrainState.UNDRAIN_FAILED
    with contextlib.suppress(Exception):  # the database may be what failed the job
        _set_state(job.change, state)
    job.drain_report = {"hook": drained.hook.name, "put_back": why is None, "why": why}
    with contextlib.suppress(Exception):
        _record(job, AuditAction.CHANGE_UNDRAINED, job.drain_report)


def outcome_note(job: Job) -> str:
    """What the final status adds when the host could not be put back in rotation."""
    report = job.drain_report
    if report is None or report["put_back"]:
        return ""
    return (
        f"; the host is still out of rotation: putting it back with {report['hook']} failed "
        f"({report['why']})"
    )


def interrupted_note(change: ChangeRequest) -> dict[str, Any] | None:
    """For recovery: what a job that died may have left drained (None: nothing)."""
    if change.drain_state not in (
        DrainState.DRAINING,
        DrainState.DRAINED,
        DrainState.UNDRAIN_FAILED,
    ):
        return None
    hook = (change.params or {}).get("drain", {}).get("hook_name", "?")
    return {
        "state": change.drain_state,
        "hook": hook,
        "note": f"the host may still be out of its load balancer's rotation: the job ran the "
        f"drain hook {hook} and did not put it back; run its undrain by hand",
    }


def _set_state(change: ChangeRequest, state: str) -> None:
    ChangeRequest.objects.filter(pk=change.pk).update(drain_state=state)
    change.drain_state = state


def _record(job: Job, action: AuditAction, data: dict[str, Any]) -> None:
    audit.record(
        action=action,
        target=job.change,
        host=job.host,
        snapshot=job.journal.snapshot,
        correlation_id=job.change.correlation_id,
        data=data,
    )
