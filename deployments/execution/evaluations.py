"""Running the coherence suite and the serving benchmark as logged steps of a change job.

Every request is one command through the job's HostShell (fenced by the lease, renewed while it
runs) and ends within JOB_COMMAND_TIMEOUT_SECONDS: curl's own limit for a check, the client's
--timeout for a benchmark level. Each run is an Evaluation row, opened when it starts and
closed however it ends. A run reports what it found; the caller
(deployments.execution.verification, the runner's baseline) decides what a failure means for
the change.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from django.conf import settings

from hosts import engine_commands, parsers
from hosts.commands import UnsafeCommand
from hosts.ssh import SSHFailure

from ..choices import CheckKind, CheckOutcome, EvaluationKind, EvaluationPhase
from ..evaluation import benchmark, coherence, selectors
from ..host_scripts import serving_bench_source
from ..models import CoherenceCheck, DeploymentRevision, Evaluation, JobStep
from .job import Job

PHASE_PREFIX: dict[str, str] = {
    EvaluationPhase.BASELINE: "baseline: ",
    EvaluationPhase.AFTER: "",
    EvaluationPhase.RESTORE: "restored: ",
    EvaluationPhase.ON_DEMAND: "",
}


class _StepFailed(Exception):
    """Marks a step failed in the journal without ending the job (caught right outside it)."""


def served_name(revision: DeploymentRevision) -> str:
    plan = revision.plan
    return plan.served_names[0] if plan.served_names else revision.model.served_name


@contextlib.contextmanager
def _recorded(job: Job, evaluation: Evaluation) -> Iterator[None]:
    """Close the row however the run ends: an SSH failure or a lost lease still leaves a
    finished evaluation saying it did not finish."""
    try:
        yield
    except _StepFailed:
        raise
    except BaseException as exc:
        evaluation.finished_at = job.clock.now()
        evaluation.passed = None
        evaluation.summary = f"did not finish: {exc}"[:2000]
        evaluation.save(update_fields=["finished_at", "passed", "summary"])
        raise


def _open(
    job: Job, revision: DeploymentRevision, phase: str, kind: str, profile_id: int | None = None
) -> Evaluation:
    return Evaluation.objects.create(
        deployment=job.deployment,
        revision=revision,
        change=job.change,
        phase=phase,
        kind=kind,
        profile_id=profile_id,
        started_at=job.clock.now(),
    )


def _close(
    job: Job, evaluation: Evaluation, passed: bool, summary: str, results: dict[str, Any]
) -> None:
    evaluation.finished_at = job.clock.now()
    evaluation.passed = passed
    evaluation.summary = summary[:2000]
    evaluation.results = results
    evaluation.save(update_fields=["finished_at", "passed", "summary", "results"])


def _api_key(job: Job, step: JobStep) -> str | None:
    """The key the unit's server takes, read on the host for this step (hosts.services.
    host_api_key): held in memory for its requests, never stored, logged or shown."""
    return job.shell.api_key(step, job.deployment.unit)


def _send(
    job: Job, step: JobStep, endpoint: str, body: dict[str, Any], key: str | None
) -> coherence.Answer:
    """One request, through curl on the host (body, and the key if any, on stdin)."""
    limit = settings.JOB_COMMAND_TIMEOUT_SECONDS
    argv = engine_commands.api_request(
        job.port, endpoint, max_seconds=max(1, limit - 5), authenticated=key is not None
    )
    try:
        stdin = engine_commands.api_request_stdin(json.dumps(body), key)
    except UnsafeCommand as refused:
        return coherence.Answer(error=str(refused))
    result = job.shell.run(step, argv, stdin=stdin, timeout=limit)
    http = parsers.parse_http(result.stdout)
    if http.status != 200:
        return coherence.Answer(error=f"HTTP {http.status}: {http.error or http.body[:160]}")
    try:
        payload = json.loads(http.body)
    except ValueError:
        return coherence.Answer(error="the answer is not JSON")
    return coherence.answer_from(endpoint, payload)


def _ask(
    job: Job, step: JobStep, check: CoherenceCheck, served: str, key: str | None
) -> coherence.Answer:
    """One request of a check."""
    return _send(job, step, *coherence.request_for(check, served), key)


def _long_context(
    job: Job,
    step: JobStep,
    check: CoherenceCheck,
    served: str,
    max_model_len: int,
    key: str | None,
) -> dict[str, Any]:
    """The long-context check fitted to the revision's context (coherence.context_fit): skipped
    on a context too small for it; its filler counted by the server first when the configured
    words might not fit."""
    fit = coherence.context_fit(check, max_model_len)
    if fit.skipped is not None:
        judged = coherence.Judged(
            CheckOutcome.SKIPPED, fit.skipped, {"max_model_len": max_model_len}
        )
        return coherence.result_row(check, [], judged)
    if fit.calibrate:
        calibration = coherence.calibration_request(check, served, fit.words)
        counted = _send(job, step, "completions", calibration, key)
        if counted.error is None and counted.prompt_tokens:
            fit = coherence.context_fit(check, max_model_len, (fit.words, counted.prompt_tokens))
    answer = _send(job, step, *coherence.request_for(check, served, fit.words), key)
    judged = coherence.fitted(coherence.judge(check, [answer]), fit, check)
    return coherence.result_row(check, [answer], judged)


def coherence_run(job: Job, revision: DeploymentRevision, phase: str) -> Evaluation:
    """The model's suite against what serves now; the Evaluation says whether it passed."""
    checks = coherence.suite_for(revision.model)
    served = served_name(revision)
    evaluation = _open(job, revision, phase, EvaluationKind.COHERENCE)
    name = f"{PHASE_PREFIX[phase]}coherence suite on revision {revision.number}"
    with contextlib.suppress(_StepFailed), _recorded(job, evaluation), job.step(name) as step:
        key = _api_key(job, step)
        results: list[dict[str, Any]] = []
        compare = [c for c in checks if c.kind == CheckKind.PREVIOUS_REVISION]
        for check in (c for c in checks if c.kind != CheckKind.PREVIOUS_REVISION):
            if check.kind == CheckKind.LONG_CONTEXT:
                context = revision.max_model_len
                results.append(_long_context(job, step, check, served, context, key))
                continue
            times = 2 if check.kind == CheckKind.DETERMINISM else 1
            answers = [_ask(job, step, check, served, key) for _ in range(times)]
            results.append(coherence.result_row(check, answers, coherence.judge(check, answers)))
        for check in compare:
            judged = coherence.compare_with(results, selectors.previous_suite(evaluation))
            results.append(coherence.result_row(check, [], judged))
        passed, summary = coherence.suite_summary(results)
        _close(job, evaluation, passed, summary, {"checks": results, "served_name": served})
        lines = [f"{r['outcome']:>12}  {r['name']}: {r['detail']}" for r in results]
        step.output = "\n".join([summary, *lines])
        if not passed:
            raise _StepFailed(summary)
    return evaluation


def benchmark_run(
    job: Job, revision: DeploymentRevision, phase: str, definition: dict[str, Any]
) -> Evaluation:
    """The profile's concurrency levels, one step and one command each. A level that cannot
    reach the host ends the run (the rest would not either); the change goes on."""
    served = served_name(revision)
    evaluation = _open(job, revision, phase, EvaluationKind.BENCHMARK, definition.get("id"))
    plan = benchmark.levels(
        definition,
        engine_python=job.deployment.engine_python,
        port=job.port,
        served_name=served,
        command_limit=float(settings.JOB_COMMAND_TIMEOUT_SECONDS),
    )
    results: list[dict[str, Any]] = []
    with _recorded(job, evaluation):
        for level in plan:
            row = _bench_level(job, phase, definition["name"], level)
            results.append(row)
            if row.get("unreachable"):
                break
        passed, summary = benchmark.run_summary(results, len(plan))
        stored = {"profile": definition, "levels": results, "served_name": served}
        _close(job, evaluation, passed, summary, stored)
    return evaluation


def _bench_level(job: Job, phase: str, profile: str, level: benchmark.Level) -> dict[str, Any]:
    name = f"{PHASE_PREFIX[phase]}benchmark {profile!r}: {level.concurrency} concurrent"
    row: dict[str, Any] = {"concurrency": level.concurrency, "error": "did not run"}
    with contextlib.suppress(_StepFailed), job.step(name) as step:
        try:
            client = serving_bench_source(_api_key(job, step))
            result = job.shell.run(step, level.argv, stdin=client, timeout=level.timeout)
        except SSHFailure as failure:
            row = {"concurrency": level.concurrency, "error": failure.message, "unreachable": True}
        else:
            row = benchmark.level_result(level.concurrency, result.stdout)
            if result.exit_status != 0:
                row = {
                    "concurrency": level.concurrency,
                    "error": f"exited {result.exit_status}: {result.stderr.strip()[-200:]}",
                }
        why = benchmark.level_failed(row)
        step.output = why or _level_line(row)
        if why:
            raise _StepFailed(why)
    return row


def _level_line(row: dict[str, Any]) -> str:
    """A level's figures in one line, for the job's step (and its notes, each on its own)."""
    sent = row["input_tokens_sent"]
    asked = row["input_tokens_asked"]
    if asked is not None and sent["mean"] is not None:
        prompt = f", input {asked} tokens asked, {sent['mean']:g} sent ({row['input_counted_by']})"
    else:
        prompt = ""
    line = (
        f"{row['output_tok_s']:,.1f} output tok/s, {row['requests_s']:.2f} req/s, TTFT p50 "
        f"{row['ttft_ms']['p50']:.0f} ms, ITL p50 {row['itl_ms']['p50'] or 0:.1f} ms per chunk, "
        f"{row['itl_per_token_ms']['p50'] or 0:.1f} ms per token{prompt}"
    )
    return "\n".join([line, *row.get("notes", [])])
