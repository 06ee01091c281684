"""Requesting a rollout: what it may carry, which hosts and waves, and what its approval binds
to (rollout_params_digest, rollout_hosts_digest)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from controlplane.accounts.models import HostGroup
from controlplane.accounts.roles import OPERATOR
from controlplane.audit import context as audit_context
from controlplane.audit import reasons
from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from controlplane.canonical import canonical_digest
from hosts.models import Host
from hosts.scope import user_sees_host
from hosts.services import hosts_rows_lock

from .. import kinds
from ..models import BenchmarkProfile, Deployment, DrainHook, ModelArtifact
from ..services.drain_requests import drain_params
from ..services.refusals import ChangeRefused
from ..unit_files import engine_flags, units
from .access import RolloutRefused, require_role_on_hosts, rollout_request_allowed
from .choices import OPEN_ROLLOUT_STATUSES, ROLLOUT_KINDS, WaveUnit
from .models import Rollout, RolloutHost
from .waves import wave_numbers

# Checked here so the form and the API say it before anything is stored; the model's
# validators say the same of stored rows.
VALIDATED_FIELDS = (
    "wave_size",
    "max_down",
    "progress_deadline_seconds",
    "benchmark_margin_pct",
    "wave_unit",
)


def rollout_params_digest(rollout: Rollout) -> str:
    """What a rollout's approval is bound to: the change each host gets, the hosts in the order
    they are taken, how the rollout goes (waves, hosts down at once, margin, deadline), and
    the drain hook each change runs first.
    Not each host's wave, which follows from these (a skipped canary's place is taken by the
    next host: orchestrator)."""
    hosts = rollout.hosts.order_by("position").values_list("host_id", "deployment_id")
    params: dict[str, Any] = {
        "kind": rollout.kind,
        "model": rollout.model_id,
        "tensor_parallel_size": rollout.tensor_parallel_size,
        "max_model_len": rollout.max_model_len,
        "extra_args": rollout.extra_args,
        "environment": rollout.environment,
        "acknowledge_busy": rollout.acknowledge_busy,
        "benchmark": rollout.benchmark,
        "benchmark_margin_pct": rollout.benchmark_margin_pct,
        "unit": rollout.unit,
        "wave_size": rollout.wave_size,
        "wave_unit": rollout.wave_unit,
        "max_down": rollout.max_down,
        "progress_deadline_seconds": rollout.progress_deadline_seconds,
        "hosts": [list(row) for row in hosts],
    }
    if rollout.drain_hook_digest:
        # Only when it drains, so a rollout requested before rollouts could drain keeps the
        # digest its approval was given for. The hook by name and by what it runs, as a
        # change request binds to it.
        params["drain"] = {
            "hook": rollout.drain_hook_name,
            "hook_digest": rollout.drain_hook_digest,
            "deadline_seconds": rollout.drain_deadline_seconds,
        }
    return canonical_digest(params)


def rollout_hosts_digest(rollout: Rollout) -> str:
    """What each host served when the rollout was approved (RolloutHost.approved_*)."""
    rows = rollout.hosts.order_by("position").values_list(
        "host_id",
        "approved_snapshot_id",
        "approved_revision_id",
        "approved_unit_sha256",
        "approved_models",
    )
    return canonical_digest([list(row) for row in rows])


def rollout_create(
    *,
    user: Any,
    kind: str,
    reason: str,
    hosts: list[Host] | None = None,
    host_group: HostGroup | None = None,
    unit: str = "",
    model: ModelArtifact | None = None,
    tensor_parallel_size: int | None = None,
    max_model_len: int | None = None,
    extra_args: list[str] | None = None,
    environment: dict[str, str] | None = None,
    benchmark: bool = False,
    benchmark_profile: BenchmarkProfile | None = None,
    benchmark_margin_pct: int = 10,
    acknowledge_busy: bool = False,
    wave_size: int = 1,
    wave_unit: str = WaveUnit.HOSTS,
    max_down: int = 1,
    progress_deadline_seconds: int = 1800,
    drain_hook: DrainHook | None = None,
    drain_deadline_seconds: int | None = None,
) -> Rollout:
    # One function, long for its keyword parameters: the one place a rollout is requested.
    """Record a rollout of `kind` over `hosts` (or `host_group`'s hosts), waiting for a second
    person's approval. Each host's own change is requested only when its turn comes. With a
    `drain_hook` each host's change (and its rollback) drains the host first, waiting up to
    `drain_deadline_seconds` for its requests in flight, as a change request does."""
    rollout_request_allowed(user=user)
    if kind not in ROLLOUT_KINDS:
        allowed = ", ".join(str(kinds.spec(k).label) for k in ROLLOUT_KINDS)
        raise RolloutRefused(f"a rollout carries a {allowed}, not {kind!r}", fields={"kind": kind})
    try:
        reason = reasons.validate_reason(reason, what="a rollout")
    except ValidationError as exc:
        raise RolloutRefused(exc.messages[0]) from exc
    shaped = {
        "tensor_parallel_size": tensor_parallel_size,
        "max_model_len": max_model_len,
        "extra_args": extra_args,
        "environment": environment,
    }
    wrong = kinds.request_field_errors(
        kind,
        model=model is not None,
        shaped=[k for k, v in shaped.items() if v is not None],
        benchmark=benchmark or benchmark_profile is not None,
        drain=drain_hook is not None,
    )
    if wrong:
        raise RolloutRefused(" ".join(wrong.values()), fields=wrong)
    _check_shaping(extra_args, environment)
    drain = _drain(drain_hook, drain_deadline_seconds)
    profile = _profile(benchmark_profile, benchmark)
    chosen = _selection(user, hosts, host_group)
    rollout = Rollout(
        kind=kind,
        model=model,
        tensor_parallel_size=tensor_parallel_size,
        max_model_len=max_model_len,
        extra_args=extra_args,
        environment=environment,
        acknowledge_busy=acknowledge_busy,
        drain_hook=drain_hook,
        drain_hook_name=drain["hook_name"] if drain else "",
        drain_hook_digest=drain["hook_digest"] if drain else "",
        drain_deadline_seconds=drain["deadline_seconds"] if drain else None,
        benchmark_profile=profile,
        benchmark=profile.definition() if profile is not None else None,
        benchmark_margin_pct=benchmark_margin_pct,
        host_group=host_group,
        host_group_name=host_group.name if host_group is not None else "",
        unit=unit,
        wave_size=wave_size,
        wave_unit=wave_unit,
        max_down=max_down,
        progress_deadline_seconds=progress_deadline_seconds,
        reason=reason,
        requested_by=user,
        requested_by_name=user.get_username(),
        params_digest="",
        correlation_id=audit_context.current().correlation_id or audit_context.new_correlation_id(),
    )
    _validate(rollout)
    numbers = wave_numbers(len(chosen), wave_size=wave_size, unit=wave_unit)
    with transaction.atomic():
        # The hosts' rows, then the audit chain's lock, as every writer takes them
        # (audit.chain_lock): two requests naming one host cannot both find it in no open
        # rollout.
        hosts_rows_lock(h.pk for h in chosen)
        audit.chain_lock()
        deployments = _deployments(chosen, unit)
        _refuse_hosts_in_open_rollouts(chosen)
        rollout.waves = max(numbers) + 1
        rollout.save()
        RolloutHost.objects.bulk_create(
            RolloutHost(rollout=rollout, host=host, deployment=deployment, position=i, wave=wave)
            for i, (host, deployment, wave) in enumerate(
                zip(chosen, deployments, numbers, strict=True)
            )
        )
        rollout.params_digest = rollout_params_digest(rollout)
        rollout.save(update_fields=["params_digest"])
        audit.record(
            action=AuditAction.ROLLOUT_REQUESTED,
            actor=user,
            target=rollout,
            hosts=[host.pk for host in chosen],
            correlation_id=rollout.correlation_id,
            data={
                "kind": kind,
                "model": str(model) if model is not None else None,
                "reason": reason,
                "hosts": [host.name for host in chosen],
                "host_group": rollout.host_group_name or None,
                "waves": rollout.waves,
                "wave_size": wave_size,
                "wave_unit": wave_unit,
                "max_down": max_down,
                "benchmark": (rollout.benchmark or {}).get("name"),
                "benchmark_margin_pct": benchmark_margin_pct,
                "progress_deadline_seconds": progress_deadline_seconds,
                "extra_args": extra_args,
                "environment": environment,
                "drain": drain,
                "params_digest": rollout.params_digest,
            },
        )
    return rollout


def _check_shaping(extra_args: list[str] | None, environment: dict[str, str] | None) -> None:
    """What a person typed, refused now rather than host by host (each host's request checks it
    again, as any request does)."""
    if extra_args is not None:
        try:
            engine_flags.check_extra_args(extra_args)
        except engine_flags.EngineArgRefused as exc:
            raise RolloutRefused(
                f"extra arguments: {exc}", fields={"extra_args": str(exc)}
            ) from exc
    if environment is not None:
        try:
            units.validate_environment(environment)
        except ValidationError as exc:
            raise RolloutRefused(f"environment: {exc.messages[0]}") from exc


def _drain(hook: DrainHook | None, deadline_seconds: int | None) -> dict[str, Any] | None:
    """The hook and deadline each host's change will carry, checked as a change request checks
    them (an enabled hook, a deadline in bounds, no deadline without a hook)."""
    try:
        return drain_params(hook, deadline_seconds)
    except ChangeRefused as exc:
        raise RolloutRefused(exc.message, **exc.details) from exc


def rollout_drain_problem(rollout: Rollout) -> str | None:
    """Why the drain hook a rollout was requested with may no longer be run under its approval:
    deleted, disabled, or changed (what it runs) since. None when it does not drain."""
    if not rollout.drain_hook_digest:
        return None
    hook, name = rollout.drain_hook, rollout.drain_hook_name
    if hook is None:
        return f"the drain hook {name} it was requested with was deleted"
    if not hook.enabled:
        return f"the drain hook {name} it was requested with was disabled"
    if hook.digest() != rollout.drain_hook_digest:
        return f"the drain hook {name} was changed after the rollout was requested"
    return None


def _profile(profile: BenchmarkProfile | None, benchmark: bool) -> BenchmarkProfile | None:
    if profile is None and benchmark:
        profile = BenchmarkProfile.objects.filter(is_default=True).first()
        if profile is None:
            raise RolloutRefused("no benchmark profile is marked default: pick one")
    return profile


def _validate(rollout: Rollout) -> None:
    try:
        rollout.full_clean(
            exclude=[f.name for f in Rollout._meta.fields if f.name not in VALIDATED_FIELDS],
            validate_unique=False,
            validate_constraints=False,
        )
    except ValidationError as exc:
        fields = {name: " ".join(messages) for name, messages in exc.message_dict.items()}
        raise RolloutRefused(
            "; ".join(f"{name}: {text}" for name, text in fields.items()), fields=fields
        ) from exc
    if rollout.wave_unit == WaveUnit.PERCENT and rollout.wave_size > 100:
        raise RolloutRefused(
            "a wave holds at most 100 % of the hosts", fields={"wave_size": "at most 100"}
        )


def _selection(user: Any, hosts: list[Host] | None, group: HostGroup | None) -> list[Host]:
    """The hosts, in name order (the canary is the first), each seen by the requester and
    held with the operator role."""
    if (hosts is None) == (group is None):
        raise RolloutRefused("choose either a host group or a list of hosts")
    chosen = list(group.hosts.all()) if group is not None else list(hosts or [])
    unique = sorted({host.pk: host for host in chosen}.values(), key=lambda host: host.name)
    if not unique:
        raise RolloutRefused("a rollout needs at least one host", fields={"hosts": "none chosen"})
    hidden = [host for host in unique if not user_sees_host(user, host)]
    if hidden:
        # Not named: a host outside the requester's groups is not theirs to know of.
        raise RolloutRefused(
            f"{len(hidden)} of the chosen hosts are not ones you can see", code="not_found"
        )
    require_role_on_hosts(user, OPERATOR, unique, "Requesting a rollout")
    return unique


def _deployments(hosts: list[Host], unit: str) -> list[Deployment]:
    """Each host's deployment the rollout changes: the one named `unit`, or its only one."""
    found: dict[int, list[Deployment]] = {}
    rows = Deployment.objects.filter(host__in=hosts).select_related("host", "model")
    for deployment in rows.filter(unit=unit) if unit else rows:
        found.setdefault(deployment.host_id, []).append(deployment)
    problems = []
    for host in hosts:
        mine = found.get(host.pk, [])
        if not mine:
            problems.append(f"{host.name} has no deployment" + (f" of {unit}" if unit else ""))
        elif len(mine) > 1:
            problems.append(f"{host.name} has {len(mine)} deployments: name the unit")
    if problems:
        raise RolloutRefused("; ".join(problems), fields={"hosts": problems})
    return [found[host.pk][0] for host in hosts]


def _refuse_hosts_in_open_rollouts(hosts: list[Host]) -> None:
    """A host is in one open rollout at a time: two would race to change it, each on the
    other's approval."""
    busy = (
        RolloutHost.objects.filter(host__in=hosts, rollout__status__in=OPEN_ROLLOUT_STATUSES)
        .select_related("host", "rollout")
        .order_by("host__name")
    )
    taken = [f"{rh.host.name} (rollout #{rh.rollout_id})" for rh in busy]
    if taken:
        raise RolloutRefused(
            f"already in an open rollout: {', '.join(taken)}; let it finish or abort it first",
            code="conflict",
        )
