"""Did the change work? Waiting for the service, the smoke completion, the throughput
measurement and the post-change snapshot, each a logged step of the job."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings

from hosts import commands, parsers

from .choices import ChangeKind
from .job import Job
from .models import ChangeRequest, DeploymentRevision, JobStep
from .outcomes import VerificationFailed
from .steps import MAX_OUTPUT_CHARS

STOP_TIMEOUT_SECONDS = 120


def wait_inactive(job: Job) -> None:
    with job.step("wait for the service to stop") as step:
        deadline = job.clock.monotonic() + STOP_TIMEOUT_SECONDS
        while job.clock.monotonic() < deadline:
            state = job.shell.unit_state(step, job.deployment.unit)
            if state is not None and state.active_state in {"inactive", "failed"}:
                return
            job.clock.sleep(settings.HEALTH_POLL_SECONDS)
        raise VerificationFailed(f"the service did not stop within {STOP_TIMEOUT_SECONDS} s")


def wait_healthy(job: Job) -> None:
    timeout = job.deployment.load_timeout_seconds
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
            health = job.shell.run(step, commands.http_get(job.port, "/health"))
            if parsers.parse_http(health.stdout).status == 200:
                step.output = "healthy"
                return
            if job.clock.monotonic() >= deadline:
                raise VerificationFailed(f"/health did not answer 200 within {timeout} s")
            job.clock.sleep(settings.HEALTH_POLL_SECONDS)


def complete(
    job: Job, step: JobStep, revision: DeploymentRevision, max_tokens: int
) -> dict[str, Any]:
    """One completion through the server's API on the host's loopback."""
    body = json.dumps(
        {
            "model": revision.model.served_name,
            "prompt": revision.model.smoke_prompt,
            "max_tokens": max_tokens,
            "temperature": 0,
        }
    )
    limit = settings.JOB_COMMAND_TIMEOUT_SECONDS
    result = job.shell.run(
        step, commands.completion_request(job.port, body, max_seconds=limit - 5), timeout=limit
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


def smoke(job: Job, revision: DeploymentRevision) -> None:
    expect = revision.model.smoke_expect
    with job.step(f"smoke completion must contain {expect!r}") as step:
        answer = complete(job, step, revision, 32)
        step.output = f"prompt: {revision.model.smoke_prompt!r}\nanswer: {answer['text']!r}"
        if expect.lower() not in answer["text"].lower():
            raise VerificationFailed(
                f"incoherent: the smoke completion does not contain {expect!r}"
            )


def benchmark(job: Job, revision: DeploymentRevision, concurrency: int = 4) -> None:
    with job.step(f"throughput: 1 stream and {concurrency} concurrent") as step:
        started = job.clock.monotonic()
        tokens = sum(
            int(complete(job, step, revision, 64)["usage"].get("completion_tokens") or 0)
            for _ in range(3)
        )
        single = tokens / max(1e-6, job.clock.monotonic() - started)
        started = job.clock.monotonic()
        with ThreadPoolExecutor(concurrency) as pool:
            answers = list(
                pool.map(lambda _: complete(job, step, revision, 64), range(concurrency))
            )
        total = sum(int(a["usage"].get("completion_tokens") or 0) for a in answers)
        many = total / max(1e-6, job.clock.monotonic() - started)
        result = {
            "single_stream_tokens_per_s": round(single, 1),
            "concurrent_tokens_per_s": round(many, 1),
            "concurrency": concurrency,
        }
        step.output = json.dumps(result)
        if revision.benchmark is None:
            revision.benchmark = result
            revision.save(update_fields=["benchmark"])


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
        if job.change.kind == ChangeKind.STOP:
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
