"""Pre-flight: what a change would serve, and what the snapshot says about doing it now."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

from hosts import commands
from hosts.choices import HostKeyStatus
from hosts.models import StateSnapshot
from hosts.state import HostState

from .. import engine_flags, fit, revisions
from ..choices import ACTIVE_JOB_STATUSES, SERVING_KINDS, ChangeKind
from ..models import ChangeRequest, Deployment, ModelArtifact
from .refusals import ChangeRefused


@dataclass
class Preflight:
    fit: fit.FitCheck | None = None
    inflight: float | None = None
    busy: bool = False
    active_job: ChangeRequest | None = None
    problems: list[str] = field(default_factory=list)  # refusals
    warnings: list[str] = field(default_factory=list)  # need an explicit acknowledgement


def change_target_for(
    *,
    deployment: Deployment,
    kind: str,
    model: ModelArtifact | None = None,
    tensor_parallel_size: int | None = None,
    max_model_len: int | None = None,
    extra_args: list[str] | None = None,
) -> revisions.ChangeTarget:
    """What the change would serve, or a refusal naming the argument at fault."""
    try:
        return revisions.change_target(
            deployment=deployment,
            kind=kind,
            model=model,
            tensor_parallel_size=tensor_parallel_size,
            max_model_len=max_model_len,
            extra_args=extra_args,
        )
    except engine_flags.EngineArgRefused as exc:
        raise ChangeRefused(f"extra arguments: {exc}") from exc
    except revisions.NoRollbackTarget as exc:
        raise ChangeRefused(str(exc)) from exc
    except commands.UnsafeCommand as exc:  # a stored row that bypassed validation
        raise ChangeRefused(f"the deployment's stored fields cannot be rendered: {exc}") from exc


def change_preflight(
    *, deployment: Deployment, target: revisions.ChangeTarget, snapshot: StateSnapshot
) -> Preflight:
    """What the snapshot says about carrying out `target`: trust, one job per host, fit at the
    parallelism the target unit will run, and requests in flight."""
    result = Preflight()
    host = deployment.host
    if host.host_key_status != HostKeyStatus.PINNED:
        result.problems.append("the host key is not pinned: every command to this host is blocked")
    result.active_job = ChangeRequest.objects.filter(
        host=host, status__in=ACTIVE_JOB_STATUSES
    ).first()
    if result.active_job is not None:
        result.problems.append(
            f"change #{result.active_job.pk} is {result.active_job.status} on {host.name}; "
            "one job per host at a time"
        )
    state = snapshot.state()
    if target.kind in SERVING_KINDS:
        result.fit = fit_check(deployment=deployment, target=target, state=state)
        if not result.fit.fits:
            result.problems.append(f"{target.model} {result.fit.message}")
    if target.kind != ChangeKind.START:
        result.inflight = state.inflight(deployment.unit)
        if result.inflight:
            result.busy = True
            result.warnings.append(
                f"the server has {result.inflight:.0f} requests in flight; acting now drops them"
            )
    return result


def fit_check(
    *, deployment: Deployment, target: revisions.ChangeTarget, state: HostState
) -> fit.FitCheck:
    return fit.model_fits(
        state=state,
        weights_gib=target.model.weights_gib,
        plan=target.plan,
        unit=deployment.unit,
        kv_reserve_gib=settings.KV_CACHE_RESERVE_GIB,
    )
