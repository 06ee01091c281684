"""Did the change work? Waiting for the service, the coherence suite, the serving benchmark
and the post-change snapshot, each a logged step of the job (the suite and the benchmark run in
deployments.execution.evaluations)."""

from __future__ import annotations

from django.conf import settings

from hosts import commands, parsers
from hosts.models import StateSnapshot

from .. import kinds
from ..choices import CheckOutcome, EvaluationPhase
from ..evaluation import benchmark
from ..models import ChangeRequest, DeploymentRevision, Evaluation
from ..unit_files import units
from . import evaluations
from .job import Job
from .outcomes import VerificationFailed
from .steps import MAX_OUTPUT_CHARS

STOP_TIMEOUT_SECONDS = 120


def stop_seconds(job: Job) -> int:
    """How long stopping the unit that serves now may take: a unit written with a drain grace
    drains for up to that, and systemd kills it only after TimeoutStopSec= (units)."""
    revision = job.change.from_revision
    grace = revision.drain_grace_seconds if revision is not None else 0
    return units.timeout_stop_seconds(grace) if grace else 0


def wait_inactive(job: Job) -> None:
    timeout = max(STOP_TIMEOUT_SECONDS, stop_seconds(job) + STOP_TIMEOUT_SECONDS // 4)
    with job.step("wait for the service to stop") as step:
        deadline = job.clock.monotonic() + timeout
        while job.clock.monotonic() < deadline:
            state = job.shell.unit_state(step, job.deployment.unit)
            if state is not None and state.active_state in {"inactive", "failed"}:
                return
            job.clock.sleep(settings.HEALTH_POLL_SECONDS)
        raise VerificationFailed(f"the service did not stop within {timeout} s")


def wait_healthy(job: Job) -> None:
    # A restart first stops the unit, which with a drain grace may take that long.
    timeout = job.deployment.load_timeout_seconds + stop_seconds(job)
    unit = job.deployment.unit
    with job.step(f"wait for /health (up to {timeout} s)") as step:
        deadline = job.clock.monotonic() + timeout
        while True:
            job.journal.check_cancel()
            state = job.shell.unit_state(step, unit)
            if state is not None and state.active_state == "failed":
                journal = job.shell.run(step, commands.unit_journal(unit, 40))
                step.output = journal.stdout[-MAX_OUTPUT_CHARS:]
                raise VerificationFailed("the service failed while starting (journal attached)")
            # A draining old server is never taken for the new one: vLLM's middleware and
            # SGLang's graceful exit both answer /health with 503 until they are gone.
            health = job.shell.run(step, commands.http_get(job.port, "/health"))
            if parsers.parse_http(health.stdout).status == 200:
                step.output = "healthy"
                return
            if job.clock.monotonic() >= deadline:
                raise VerificationFailed(f"/health did not answer 200 within {timeout} s")
            job.clock.sleep(settings.HEALTH_POLL_SECONDS)


def coherent(job: Job, revision: DeploymentRevision, phase: str) -> Evaluation:
    """The model's coherence suite on what serves now; a failing suite fails verification."""
    suite = evaluations.coherence_run(job, revision, phase)
    if not suite.passed:
        raise VerificationFailed(f"incoherent: the coherence suite {suite.summary}")
    return suite


def measure(job: Job, revision: DeploymentRevision, phase: str) -> Evaluation | None:
    """The serving benchmark the change asked for (its profile as it was when requested).
    Slow or failing figures are recorded and shown, and weigh in the health verdict; they do
    not undo the change: an engineer reads them and decides."""
    definition = benchmark.definition_of(job.change.params)
    if definition is None:
        return None
    return evaluations.benchmark_run(job, revision, phase, definition)


def baseline(job: Job, before: StateSnapshot) -> None:
    """Before the first destructive command, on a unit that serves: the suite (and the benchmark
    the change asked for) against the revision serving now. Its failures do not stop the
    change; they are reported with it, so a host that was already broken is not blamed on it."""
    change, unit = job.change, job.deployment.unit
    revision = change.from_revision
    state = before.state()
    serving = state.unit_state(unit).active_state == "active" and state.server(unit).healthy
    if not kinds.spec(change.kind).serves or revision is None or not serving:
        return
    job.baseline = evaluations.coherence_run(job, revision, EvaluationPhase.BASELINE)
    measure(job, revision, EvaluationPhase.BASELINE)


def baseline_note(job: Job) -> str:
    """What the final status adds when the revision serving before already failed checks."""
    suite = job.baseline
    if suite is None or suite.passed is not False:
        return ""
    failed = [
        c["name"] for c in suite.results.get("checks", []) if c["outcome"] == CheckOutcome.FAILED
    ]
    return (
        f"; the previous revision already failed {len(failed)} "
        f"check{'s' if len(failed) != 1 else ''} before the change ({', '.join(failed)})"
    )


def snapshot_on_failure(job: Job, *, final: bool) -> None:
    """The host as verification found it failing, before anything is put back. `final`: nothing
    will be restored, so it is also the change's after-snapshot."""
    with job.step("snapshot of the failed state") as step:
        found = job.shell.probe()
        fields = {"failure_snapshot": found, **({"after_snapshot": found} if final else {})}
        ChangeRequest.objects.filter(pk=job.change.pk).update(**fields)
        step.output = f"snapshot #{found.pk}: {found.status}"


def verify_after(job: Job, revision: DeploymentRevision | None) -> None:
    """The post-change snapshot must show the unit in the state the change was for."""
    unit = job.deployment.unit
    with job.step("post-change snapshot") as step:
        after = job.shell.probe()
        ChangeRequest.objects.filter(pk=job.change.pk).update(after_snapshot=after)
        state = after.state()
        active = state.unit_state(unit).active_state
        served = state.served_models(unit)
        roots = state.server(unit).model_roots
        step.output = f"snapshot #{after.pk}: {active}, serving {served or 'nothing'} {roots}"
        if kinds.spec(job.change.kind).leaves_unit_stopped:
            if active not in {"inactive", "failed"}:
                raise VerificationFailed(f"the service is {active} after stop")
            return
        if revision is None:
            return
        # Like with like: what the revision's own unit names (variables expanded), against
        # what the server says it loaded.
        plan = revision.plan
        name = plan.served_names[0] if plan.served_names else revision.model.served_name
        if name not in served:
            raise VerificationFailed(f"the host serves {served or 'nothing'}, not {name}")
        if roots and plan.model and plan.model not in roots:
            raise VerificationFailed(f"the server loaded {roots}, not {plan.model}")
