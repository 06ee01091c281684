"""Rows rollout tests start from: a fleet of hosts (no SSH) with their deployments, fresh
snapshots and verdicts, and helpers that drive a rollout the way workers do, without a probe:
each turn is taken on a snapshot the test stores (turns.host_turn_on), each change ends through
its lifecycle with the evaluations a job would have written."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from controlplane.audit.actions import AuditAction
from deployments import lifecycle as change_lifecycle
from deployments import services
from deployments.choices import ChangeStatus, EvaluationKind, EvaluationPhase
from deployments.models import ChangeRequest, Deployment, Evaluation, Rollout, RolloutHost
from deployments.rollouts import decisions, orchestrator, requests, turns
from hosts.models import Host
from tests import factories as f


@pytest.fixture
def fleet(db: None, catalog: dict[str, Any]) -> list[Deployment]:
    """Four hosts (gpu-01 .. gpu-04) serving Kimi-K2.5 NVFP4, each with a fresh snapshot and a
    healthy verdict."""
    deployments = []
    for i in range(1, 5):
        host = f.make_host(f"gpu-{i:02d}", port=2200 + i)
        deployments.append(f.make_deployment(host, catalog["NVFP4"]))
        fresh(host)
    return deployments


def fresh(host: Host, **state: Any) -> Any:
    """A snapshot of `host` taken now, and its verdict decided on it."""
    snapshot = f.make_snapshot(host, age=1.0, parsed=f.parsed_state(**state) if state else None)
    services.host_health_update(host=host)
    return snapshot


def swap_rollout(
    operator: Any, deployments: list[Deployment], model: Any, **kwargs: Any
) -> Rollout:
    kwargs.setdefault("wave_size", 2)
    kwargs.setdefault("max_down", 2)
    return requests.rollout_create(
        user=operator, kind="model_swap", model=model, reason="INT4 serves more tokens",
        hosts=[d.host for d in deployments], **kwargs,
    )  # fmt: skip


def approved(rollout: Rollout, approver: Any) -> Rollout:
    decisions.rollout_approve(rollout=rollout, approver=approver, reason="the canary will tell")
    rollout.refresh_from_db()
    return rollout


def take_turns(rollout: Rollout, **states: dict[str, Any]) -> list[RolloutHost]:
    """One look by a worker, with each claimed turn taken on a snapshot stored now (of the
    state `states[host name]` gives, keyword arguments of factories.parsed_state, if any)."""
    orchestrator.rollout_sync(rollout_id=rollout.pk)
    claims = orchestrator.rollout_decide(rollout_id=rollout.pk)
    for rollout_host_id, token, rollback in claims:
        rh = RolloutHost.objects.select_related("host").get(pk=rollout_host_id)
        snapshot = fresh(rh.host, **states.get(rh.host.name.replace("-", "_"), {}))
        if rollback:
            turns.rollback_turn_on(rollout_host_id=rollout_host_id, token=token, snapshot=snapshot)
        else:
            turns.host_turn_on(rollout_host_id=rollout_host_id, token=token, snapshot=snapshot)
    rollout.refresh_from_db()
    return [RolloutHost.objects.get(pk=c[0]) for c in claims]


def end_change(
    change: ChangeRequest, status: str = ChangeStatus.SUCCEEDED, *, coherent: bool = True,
    bench: tuple[float, float] | None = None, reason: str = "",
) -> ChangeRequest:  # fmt: skip
    """End a queued change as its job would: running, its evaluations written, then `status`
    (a success also makes its revision the deployment's, as the runner does)."""
    change_lifecycle.change_transition(
        change=change, source=ChangeStatus.QUEUED, target=ChangeStatus.RUNNING
    )
    now = timezone.now()
    revision = change.target_revision or change.from_revision
    assert revision is not None
    summary = "passed 6 of 6 checks" if coherent else "failed 2 of 6 checks (factual, arithmetic)"
    Evaluation.objects.create(
        deployment=change.deployment, revision=revision, change=change,
        phase=EvaluationPhase.AFTER, kind=EvaluationKind.COHERENCE, started_at=now,
        finished_at=now, passed=coherent, summary=summary,
    )  # fmt: skip
    if bench is not None:
        before, after = bench
        for phase, rate, rev in (
            (EvaluationPhase.BASELINE, before, change.from_revision),
            (EvaluationPhase.AFTER, after, revision),
        ):
            Evaluation.objects.create(
                deployment=change.deployment, revision=rev, change=change, phase=phase,
                kind=EvaluationKind.BENCHMARK, started_at=now - dt.timedelta(seconds=1),
                finished_at=now, passed=True, summary="4 levels",
                results={"profile": {"input_tokens": 128, "output_tokens": 256},
                         "levels": [{"concurrency": 1, "output_tok_s": rate}]},
            )  # fmt: skip
    if status == ChangeStatus.SUCCEEDED and change.target_revision is not None:
        Deployment.objects.filter(pk=change.deployment_id).update(
            current_revision=change.target_revision, model=change.target_revision.model
        )
    change_lifecycle.change_transition(
        change=change, source=ChangeStatus.RUNNING, target=status, reason=reason or status,
        action=AuditAction.change_ended(status),
    )  # fmt: skip
    change.refresh_from_db()
    return change


def hosts_of(rollout: Rollout) -> dict[str, RolloutHost]:
    return {
        rh.host.name: rh
        for rh in RolloutHost.objects.filter(rollout=rollout).select_related("host", "change")
    }
