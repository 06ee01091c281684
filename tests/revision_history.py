"""A deployment's week of revisions as rows, for page tests that do not run the week itself
(tests/deployments/test_the_week.py does, over SSH): Kimi-K2.5 NVFP4 adopted from the host, a
swap to MiniMax-M2.5 FP8 rolled back on the patched engine, an engine repair, MiniMax FP8 again,
then Kimi-K2.5 INT4.

Benchmark figures are the simulator's performance model (`simulator.scheduler.estimate`, the
reference benchmark: 128 tokens in, 256 out, one request per stream), which the end-to-end test
shows the product's client measures within a few per cent; percentiles are derived from its
means. Coherence results are what the suite records, with the five-token prompt failing on the
patched engine.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone

from deployments import revisions
from deployments.choices import ChangeKind, ChangeStatus, CheckKind
from deployments.evaluation.coherence import default_suite
from deployments.models import (
    ChangeRequest,
    Deployment,
    DeploymentRevision,
    Evaluation,
    ModelArtifact,
)
from hosts.models import Host
from simulator import scheduler
from tests import factories as f

LEVELS = (1, 8, 32, 64)
CHECKS = [spec["name"] for spec in default_suite("The capital of France is", "Paris")]
ANSWERS = {
    "factual": " Paris. It is the largest city in France",
    "arithmetic": " 4. Adding two and two gives four",
    "multi-turn chat": "Tokyo, the seat of the Emperor",
    "long-context recall": " The passphrase is amber-falcon.",
    "five-token prompt": " Tokyo, the seat of the Emperor",
    "greedy determinism": " a question that comes up often",
}


def _catalog() -> dict[str, ModelArtifact]:
    def artifact(name: str, variant: str, gib: float, path: str, served: str) -> ModelArtifact:
        return ModelArtifact.objects.get_or_create(
            name=name, variant=variant,
            defaults={"weights_gib": gib, "path": path, "served_name": served},
        )[0]  # fmt: skip

    return {
        "NVFP4": artifact("moonshotai/Kimi-K2.5", "NVFP4", 595,
                          "/models/moonshotai/Kimi-K2.5-NVFP4", "kimi-k2.5"),
        "FP8": artifact("MiniMaxAI/MiniMax-M2.5", "FP8", 214,
                        "/models/MiniMaxAI/MiniMax-M2.5-FP8", "minimax-m2.5"),
        "INT4": artifact("moonshotai/Kimi-K2.5", "INT4", 555,
                         "/models/moonshotai/Kimi-K2.5-INT4", "kimi-k2.5"),
    }  # fmt: skip


def levels_for(model_path: str) -> list[dict[str, Any]]:
    out = []
    for level in LEVELS:
        found = scheduler.estimate(model_path, concurrency=level)
        ttft, tpot = found.ttft_s * 1000, found.tpot_s * 1000
        out.append(
            {
                "concurrency": level, "requests": level, "completed": level, "errors": 0,
                "duration_s": round(found.duration_s, 3),
                "output_tok_s": round(found.output_tok_s, 1),
                "total_tok_s": round(found.output_tok_s * 1.5, 1),
                "requests_s": round(level / found.duration_s, 3),
                "input_tokens": 128 * level, "output_tokens": 256 * level,
                "ttft_ms": {"p50": round(ttft, 1), "p99": round(ttft * 1.3, 1)},
                "itl_ms": {"p50": round(tpot, 2), "p99": round(tpot * 1.6, 2)},
                "tpot_ms": {"mean": round(tpot, 2)}, "error_samples": [],
            }
        )  # fmt: skip
    return out


def suite_results(failing: tuple[str, ...] = ()) -> dict[str, Any]:
    checks = []
    for name in CHECKS:
        outcome = "failed" if name in failing else "passed"
        answer = " blor-quint zeph mork" if name in failing else ANSWERS.get(name, "")
        checks.append(
            {"name": name, "outcome": outcome, "answer": answer, "prompt": "",
             "detail": "expected 'Tokyo', got ' blor-quint zeph mork'" if name in failing
             else "as expected", "kind": CheckKind.FACTUAL, "prompt_tokens": 5}
        )  # fmt: skip
    passed = not failing
    summary = (
        f"failed {len(failing)} of {len(CHECKS)} checks: {', '.join(failing)}"
        if failing
        else f"passed {len(CHECKS)} of {len(CHECKS)} checks"
    )
    return {"checks": checks, "passed": passed, "summary": summary}


class _Week:
    def __init__(self, host: Host, operator: Any) -> None:
        self.host, self.operator = host, operator
        self.models = _catalog()
        self.deployment = Deployment.objects.create(
            host=host, unit=f.UNIT, model=self.models["NVFP4"], tensor_parallel_size=8
        )
        self.profile = f.default_benchmark_profile()
        self.clock = timezone.now() - dt.timedelta(days=5)
        self.first = revisions.deployment_current_revision(self.deployment)
        DeploymentRevision.objects.filter(pk=self.first.pk).update(created_at=self.clock)

    def tick(self, hours: float = 1) -> dt.datetime:
        self.clock += dt.timedelta(hours=hours)
        return self.clock

    def change(self, kind: str, status: str, source: DeploymentRevision, model: str = "") -> Any:
        change = ChangeRequest.objects.create(
            host=self.host, deployment=self.deployment, kind=kind,
            snapshot=f.make_snapshot(self.host), from_revision=source,
            params={"benchmark": self.profile.definition()},
            params_digest="-", reason="the week", requested_by=self.operator,
            requested_by_name=self.operator.username, needs_approval=True, status=status,
            correlation_id=f"week-{kind}-{self.tick():%H%M%S%f}", finished_at=self.clock,
        )  # fmt: skip
        if model:
            number = revisions.next_revision_number(self.deployment)
            content = revisions.revision_render(
                deployment=self.deployment, model=self.models[model], tensor_parallel_size=8,
                max_model_len=196608 if model == "FP8" else 262144, extra_args=[],
                number=number, base=source,
            )  # fmt: skip
            change.target_revision = revisions.revision_create(
                deployment=self.deployment, content=content, number=number,
                created_by=self.operator.username, change=change,
            )  # fmt: skip
            change.save(update_fields=["target_revision"])
            # Made when the change was requested, in the week's time.
            DeploymentRevision.objects.filter(pk=change.target_revision.pk).update(
                created_at=self.clock
            )
        return change

    def evaluate(self, change: Any, revision: DeploymentRevision, phase: str, **kw: Any) -> None:
        started = self.tick(0.1)
        if kw.get("suite") is not None:
            suite = kw["suite"]
            Evaluation.objects.create(
                deployment=self.deployment, revision=revision, change=change, phase=phase,
                kind="coherence", started_at=started, finished_at=started, passed=suite["passed"],
                summary=suite["summary"], results={"checks": suite["checks"]},
            )  # fmt: skip
        if kw.get("bench"):
            levels = levels_for(revision.model.path)
            Evaluation.objects.create(
                deployment=self.deployment, revision=revision, change=change, phase=phase,
                kind="benchmark", profile=self.profile, started_at=started, finished_at=started,
                passed=True, summary=", ".join(f"{x['output_tok_s']:,.0f} tok/s at "
                                               f"{x['concurrency']}" for x in levels),
                results={"profile": self.profile.definition(), "levels": levels},
            )  # fmt: skip


def make_week_history(host: Host, operator: Any) -> Deployment:
    """The week's revisions, changes and evaluations; returns the deployment (INT4 serving)."""
    week = _Week(host, operator)
    broken = suite_results(("factual", "five-token prompt"))
    r1 = week.first
    tried = week.change(ChangeKind.MODEL_SWAP, ChangeStatus.ROLLED_BACK, r1, "FP8")
    week.evaluate(tried, r1, "baseline", suite=broken)
    week.evaluate(tried, tried.target_revision, "after", suite=broken)
    week.evaluate(tried, r1, "restore", suite=broken)
    repair = week.change(ChangeKind.ENGINE_REPAIR, ChangeStatus.SUCCEEDED, r1)
    week.evaluate(repair, r1, "baseline", suite=broken)
    week.evaluate(repair, r1, "after", suite=suite_results())
    swap = week.change(ChangeKind.MODEL_SWAP, ChangeStatus.SUCCEEDED, r1, "FP8")
    week.evaluate(swap, r1, "baseline", suite=suite_results(), bench=True)
    week.evaluate(swap, swap.target_revision, "after", suite=suite_results(), bench=True)
    int4 = week.change(ChangeKind.MODEL_SWAP, ChangeStatus.SUCCEEDED, swap.target_revision, "INT4")
    week.evaluate(int4, swap.target_revision, "baseline", suite=suite_results(), bench=True)
    week.evaluate(int4, int4.target_revision, "after", suite=suite_results(), bench=True)
    Deployment.objects.filter(pk=week.deployment.pk).update(
        current_revision=int4.target_revision, model=week.models["INT4"]
    )
    week.deployment.refresh_from_db()
    return week.deployment
