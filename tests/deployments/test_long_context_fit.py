"""The long-context recall check on a deployment whose context is small, through the runner over
real SSH to a simulated host, which refuses what does not fit its max_model_len as vLLM 0.32
does (HTTP 400). With 4000 filler words the check sent about 4,000 tokens (13,500 on the tiny
tokenizer the issue met) whatever the context: on max_model_len 2048 it failed with a 400.
Now its filler fits the revision's context, and a context too small for the check skips it with
the reason, which neither passes nor fails the suite."""

from __future__ import annotations

import pytest

from deployments import services
from deployments.choices import ChangeStatus, EvaluationKind, EvaluationPhase
from deployments.execution import runner
from deployments.models import Evaluation
from hosts import services as host_services
from hosts.models import Host, StateSnapshot
from tests.fleet import register

pytestmark = [pytest.mark.integration]


def probe(host: Host) -> StateSnapshot:
    host = Host.objects.select_related("credential").get(pk=host.pk)
    snapshot = host_services.host_probe(host=host, trigger="manual")
    assert snapshot.status == "ok", snapshot.error
    return snapshot


def redeploy(operator, approver, deployment, max_model_len: int):
    change = services.change_request_create(
        user=operator, deployment=deployment, kind="redeploy", snapshot=probe(deployment.host),
        reason="a shorter context", max_model_len=max_model_len,
    )  # fmt: skip
    if change.status == ChangeStatus.PENDING_APPROVAL:
        services.change_request_approve(
            change=change, approver=approver, snapshot=probe(deployment.host), reason="fine"
        )
    runner.change_execute(change_id=change.pk)
    change.refresh_from_db()
    return change


def long_context(change) -> dict:
    suite = Evaluation.objects.get(
        change=change, phase=EvaluationPhase.AFTER, kind=EvaluationKind.COHERENCE
    )
    assert suite.passed, suite.summary
    return next(c for c in suite.results["checks"] if c["kind"] == "long_context")


def test_the_long_context_check_fits_the_deployments_context(
    db, make_fleet, settings, operator, approver
):
    settings.HEALTH_POLL_SECONDS = 0.1
    deployment = register(make_fleet(1)).deployments[0]

    change = redeploy(operator, approver, deployment, 2048)
    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    check = long_context(change)
    assert check["outcome"] == "passed", check["detail"]
    assert "to fit max_model_len 2048" in check["detail"]
    assert 0 < check["context_words_sent"] < 4000 and check["max_model_len"] == 2048
    assert check["prompt_tokens"] <= 2048 - 16

    change = redeploy(operator, approver, deployment, 384)
    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    check = long_context(change)
    assert check["outcome"] == "skipped" and "under 512 tokens" in check["detail"]
