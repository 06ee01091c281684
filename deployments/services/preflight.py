"""Pre-flight: what a change would serve, and what the snapshot says about doing it now."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import ValidationError

from hosts import commands
from hosts import services as host_services
from hosts.choices import HostKeyStatus, SnapshotStatus
from hosts.models import StateSnapshot
from hosts.state import HostState

from .. import fit, kinds, policy, revisions, rollback
from ..choices import ACTIVE_JOB_STATUSES
from ..models import ChangeRequest, Deployment, DeploymentRevision, DrainHook, ModelArtifact
from ..unit_files import engine_flags, units
from .integrity import IntegrityFinding, latest_integrity, repair_basis
from .refusals import ChangeRefused, require_stored_rows_valid


@dataclass
class Preflight:
    fit: fit.FitCheck | None = None
    inflight: float | None = None
    busy: bool = False
    active_job: ChangeRequest | None = None
    problems: list[str] = field(default_factory=list)  # refusals
    warnings: list[str] = field(default_factory=list)  # need an explicit acknowledgement
    # The engine integrity check the decision sees (the newest; for a repair, the one it
    # rests on), and whether a change that serves something new must acknowledge it.
    integrity: IntegrityFinding | None = None
    integrity_unclean: bool = False
    fit_problem: str | None = None  # the fit's refusal, also in `problems`
    busy_warning: str | None = None  # requests in flight, also in `warnings`
    integrity_warning: str | None = None  # the unclean engine check, also in `warnings`
    # What the requester has acknowledged (the change form's checkboxes, or the request's).
    busy_acknowledged: bool = False
    integrity_acknowledged: bool = False
    # The change drains first: requests in flight are waited for, not dropped, so they need an
    # acknowledgement only for the case the drain's deadline passes with some still running.
    drains: bool = False
    repair: bool = False  # the change reinstalls the engine (an engine repair)

    @property
    def needs_busy_acknowledgement(self) -> bool:
        """Requests in flight would be dropped: refused until acknowledged (draining, the job
        waits for them instead, and the acknowledgement is only for the deadline)."""
        return self.busy and not self.drains

    @property
    def needs_integrity_acknowledgement(self) -> bool:
        """A new revision on an engine whose files differ from its package."""
        return self.integrity_unclean

    @property
    def nothing_to_repair(self) -> bool:
        """An engine repair whose integrity check found every file as its package has it."""
        return self.repair and self.integrity is not None and self.integrity.clean

    @property
    def unacknowledged(self) -> list[str]:
        """The warnings a request is refused on until they are acknowledged, and that are not
        acknowledged yet (the others, such as GPU facts a partial snapshot lacks, only warn)."""
        needed = [
            (self.busy_warning, self.busy_acknowledged or not self.needs_busy_acknowledgement),
            (self.integrity_warning, self.integrity_acknowledged),
        ]
        return [warning for warning, acknowledged in needed if warning and not acknowledged]

    @property
    def blocking(self) -> bool:
        """A request made now would be refused: a problem, or a warning not acknowledged."""
        return bool(self.problems or self.unacknowledged)

    @property
    def other_problems(self) -> list[str]:
        """The refusals besides the fit (pages show the fit on its own line, once)."""
        return [p for p in self.problems if p != self.fit_problem]

    @property
    def other_warnings(self) -> list[str]:
        """The warnings besides requests in flight (pages show those on their own line)."""
        return [w for w in self.warnings if w != self.busy_warning]


def change_target_for(
    *,
    deployment: Deployment,
    kind: str,
    model: ModelArtifact | None = None,
    tensor_parallel_size: int | None = None,
    max_model_len: int | None = None,
    extra_args: list[str] | None = None,
    environment: dict[str, str] | None = None,
    snapshot: StateSnapshot | None = None,
    revision: DeploymentRevision | None = None,
) -> revisions.ChangeTarget:
    """What the change would serve, or a refusal naming the argument at fault. The first time,
    the unit `snapshot` read on the host is adopted as the current revision. A rollback goes
    back to `revision` (one the deployment served), or one back."""
    require_stored_rows_valid(deployment, model)
    if extra_args is not None:  # what a person typed: the forms' and the API's check, again
        try:
            engine_flags.check_extra_args(extra_args)
        except engine_flags.EngineArgRefused as exc:
            raise ChangeRefused(f"extra arguments: {exc}") from exc
    if environment is not None:
        try:
            units.validate_environment(environment)
        except ValidationError as exc:
            raise ChangeRefused(f"environment: {exc.messages[0]}") from exc
    try:
        target = revisions.change_target(
            deployment=deployment,
            kind=kind,
            model=model,
            tensor_parallel_size=tensor_parallel_size,
            max_model_len=max_model_len,
            extra_args=extra_args,
            environment=environment,
            snapshot=snapshot,
            revision=revision,
        )
    except engine_flags.EngineArgRefused as exc:
        raise ChangeRefused(f"extra arguments: {exc}") from exc
    except rollback.RevisionNotServed as exc:
        raise ChangeRefused(f"revision: {exc}", fields={"revision": str(exc)}) from exc
    except (rollback.NoRollbackTarget, revisions.UnitNotWritable) as exc:
        raise ChangeRefused(str(exc)) from exc
    except units.UnitNotRewritable as exc:
        raise ChangeRefused(f"the unit cannot be rewritten: {exc}") from exc
    except commands.UnsafeCommand as exc:  # a stored row that bypassed validation
        raise ChangeRefused(f"the deployment's stored fields cannot be rendered: {exc}") from exc
    if target.revision is not None:  # a rollback: the model it goes back to is checked too
        require_stored_rows_valid(deployment, target.model)
    return target


@dataclass
class ChangeCheck:
    """What the change form shows before anything is requested: what the change would serve
    (or the refusal naming the argument at fault), the pre-flight of that on the snapshot, and
    why it needs a second person."""

    target: revisions.ChangeTarget | None = None
    target_error: str | None = None
    preflight: Preflight | None = None
    approval_because: list[str] = field(default_factory=list)


def change_check(
    *,
    deployment: Deployment,
    kind: str,
    snapshot: StateSnapshot | None,
    model: ModelArtifact | None = None,
    tensor_parallel_size: int | None = None,
    max_model_len: int | None = None,
    extra_args: list[str] | None = None,
    environment: dict[str, str] | None = None,
    revision: DeploymentRevision | None = None,
    acknowledge_busy: bool = False,
    acknowledge_integrity: bool = False,
    drain_hook: DrainHook | None = None,
    drain_deadline_seconds: int | None = None,
) -> ChangeCheck:
    """The change form's pre-flight, from every field of the form that the request's own checks
    weigh, through the same functions the request calls (change_target_for, change_preflight,
    policy.approval_reasons), so that the form cannot say "fits" about a change the request
    refuses. Without a `snapshot` there is nothing to check the target against. A `drain_hook`
    means the change drains first (its deadline is checked by the request)."""
    try:
        target = change_target_for(
            deployment=deployment, kind=kind, model=model,
            tensor_parallel_size=tensor_parallel_size, max_model_len=max_model_len,
            extra_args=extra_args, environment=environment, snapshot=snapshot,
            revision=revision,
        )  # fmt: skip
    except ChangeRefused as exc:
        return ChangeCheck(target_error=exc.message)
    checks = None
    if snapshot is not None:
        checks = change_preflight(
            deployment=deployment, target=target, snapshot=snapshot,
            drains=drain_hook is not None,
        )  # fmt: skip
        checks.busy_acknowledged = acknowledge_busy
        checks.integrity_acknowledged = acknowledge_integrity
    return ChangeCheck(target, None, checks, policy.approval_reasons(target=target))


def change_preflight(
    *,
    deployment: Deployment,
    target: revisions.ChangeTarget,
    snapshot: StateSnapshot,
    decided_on: StateSnapshot | None = None,
    drains: bool = False,
) -> Preflight:
    """What the snapshot says about carrying out `target`: trust, one job per host, fit at the
    parallelism the target unit will run, requests in flight (waited for when the change
    `drains` first, else dropped), and the engine's integrity (an engine repair's from the
    snapshot the request was `decided_on`, when that is older)."""
    result = Preflight(drains=drains, repair=kinds.spec(target.kind).reinstalls_engine)
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
    if target.writes_unit:
        result.problems += _drop_ins_overriding(state, deployment.unit)
    gpus_unknown = snapshot.status == SnapshotStatus.PARTIAL and not state.gpus
    declared = kinds.spec(target.kind)
    if declared.serves and gpus_unknown:
        result.warnings.append(
            "the GPU facts are unknown (the snapshot could not read them): the fit in GPU "
            "memory cannot be checked"
        )
    elif declared.serves:
        result.fit = fit_check(deployment=deployment, target=target, state=state)
        if not result.fit.fits:
            result.fit_problem = f"{target.model} {result.fit.message}"
            result.problems.append(result.fit_problem)
    _inflight(result, deployment, target.kind, state)
    _integrity(result, deployment, target.kind, decided_on or snapshot)
    return result


def _inflight(result: Preflight, deployment: Deployment, kind: str, state: HostState) -> None:
    """Requests in flight, for a kind that drops them: a warning to acknowledge, or (draining)
    what the job waits for."""
    if not kinds.spec(kind).drops_inflight:
        return
    result.inflight = state.inflight(deployment.unit)
    if result.inflight:
        result.busy = True
        result.busy_warning = f"the server has {result.inflight:.0f} requests in flight; " + (
            "the job drains the host first and waits for them to finish; acknowledge "
            "to drop those still running when the drain's deadline passes"
            if result.drains
            else "acting now drops them"
        )
        result.warnings.append(result.busy_warning)


@dataclass(frozen=True)
class Acknowledgement:
    """Something a requester acknowledges to go ahead, asked only when its condition holds:
    `field` is the request's (and the change form's) argument, `facts` what makes it needed
    now. `required`: refused without it; otherwise it only decides what happens later (the
    requests still running when a drain's deadline passes)."""

    field: str
    label: str
    facts: list[str]
    required: bool = True


def change_acknowledgements(
    *,
    deployment: Deployment,
    kind: str,
    snapshot: StateSnapshot | None,
    preflight: Preflight | None = None,
    drains: bool = False,
) -> list[Acknowledgement]:
    """What the change form asks to acknowledge, by the rules the request refuses on
    (requests._refuse_on_preflight, unknown_facts_to_acknowledge): requests in flight that
    would be dropped, an engine whose files differ under a new revision, what a partial
    snapshot could not see. From `preflight` when the form has one, else from the snapshot
    (a swap's pre-flight waits for a model; what is in flight does not)."""
    if snapshot is None:
        return []
    declared = kinds.spec(kind)
    if preflight is None:
        preflight = Preflight(drains=drains, repair=declared.reinstalls_engine)
        _inflight(preflight, deployment, kind, snapshot.state())
        _integrity(preflight, deployment, kind, snapshot)
    found: list[Acknowledgement] = []
    unknown = unknown_facts_to_acknowledge(kind, snapshot)
    if unknown is not None:
        found.append(
            Acknowledgement(
                "acknowledge_unknown",
                "I have read what the snapshot could not see and go ahead without it",
                [f"snapshot #{snapshot.pk} is partial; unknown: {fact}" for fact in unknown],
            )
        )
    inflight = f"{preflight.inflight or 0:.0f} requests in flight on {deployment.unit}"
    if preflight.needs_busy_acknowledgement:
        found.append(
            Acknowledgement(
                "acknowledge_busy",
                "I know these requests are in flight and accept dropping them",
                [f"snapshot #{snapshot.pk}: {inflight}; acting now drops them"],
            )
        )
    elif preflight.drains and declared.drops_inflight:
        now = inflight if preflight.busy else "none in flight now"
        found.append(
            Acknowledgement(
                "acknowledge_busy",
                "Drop the requests still running when the drain's deadline passes",
                [
                    f"snapshot #{snapshot.pk}: {now}. Unticked, the job stops without "
                    "touching the service if some still run at the deadline"
                ],
                required=False,
            )
        )
    if preflight.needs_integrity_acknowledgement and preflight.integrity is not None:
        found.append(
            Acknowledgement(
                "acknowledge_integrity",
                "I know the engine's files differ from its package and go ahead anyway",
                [preflight.integrity.describe()],
            )
        )
    return found


def unknown_facts_to_acknowledge(kind: str, snapshot: StateSnapshot) -> list[str] | None:
    """The unknown facts a stop or restart on a partial snapshot must acknowledge, or None when
    none need it (the snapshot is not partial, or the kind may not rest on one at all: then
    freshness refuses it)."""
    if snapshot.status != SnapshotStatus.PARTIAL or not kinds.spec(kind).partial_snapshot_ok:
        return None
    return host_services.unknown_facts(snapshot) or ["(the snapshot did not say which facts)"]


def _integrity(
    result: Preflight, deployment: Deployment, kind: str, snapshot: StateSnapshot
) -> None:
    """An engine repair needs a recent integrity check to know what to reinstall; a change that
    serves something new on an engine whose files differ from its package warns, so that what
    a stale patch does is not blamed on the new revision."""
    declared = kinds.spec(kind)
    if declared.reinstalls_engine:
        basis = repair_basis(deployment, snapshot)
        if isinstance(basis, str):
            result.problems.append(basis)
            result.integrity = latest_integrity(deployment)
        else:
            result.integrity = basis
        return
    result.integrity = latest_integrity(deployment)
    if declared.writes_revision and result.integrity is not None and not result.integrity.clean:
        result.integrity_unclean = True
        result.integrity_warning = (
            f"the engine integrity check is not clean: {result.integrity.describe()}. A new "
            "revision on a patched engine may be blamed for what the patch does: repair the "
            "engine first, or acknowledge this to go ahead"
        )
        result.warnings.append(result.integrity_warning)


def _drop_ins_overriding(state: HostState, unit: str) -> list[str]:
    """A drop-in that sets what decides what runs (ExecStart=, User=, Environment=, ...)
    overrides the unit file a change writes, so what was approved would not be what runs."""
    dep = state.deployments.get(unit)
    drop_ins = dep.unit_files[1:] if dep is not None else []
    problems = []
    for drop_in in drop_ins:
        decisive = [d for d in units.directives(drop_in.text) if units.decisive(d)]
        if decisive:
            problems.append(
                f"the drop-in {drop_in.path} sets {decisive[0].describe()}"
                + (f" (and {len(decisive) - 1} more)" if len(decisive) > 1 else "")
                + ", which overrides the unit file a change writes: fold it into the unit or "
                "remove the drop-in, then probe again"
            )
    return problems


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


def change_review(*, change: ChangeRequest, snapshot: StateSnapshot) -> Preflight:
    """The pre-flight of a requested change on the snapshot an approver reviews: the target it
    was requested with (its stored revisions), re-checked on that snapshot."""
    current = change.from_revision
    if current is None:  # a request always records the revision serving when it was made
        return Preflight(problems=["the change records no revision to check"])
    revision = change.target_revision
    shown = revision or current
    target = revisions.ChangeTarget(
        change.kind,
        current,
        shown.model,
        shown.unit_text,
        revision=revision,
        file_variables=dict(shown.file_variables),
    )
    checks = change_preflight(
        deployment=change.deployment,
        target=target,
        snapshot=snapshot,
        decided_on=change.snapshot,
        drains="drain" in (change.params or {}),
    )
    checks.busy_acknowledged = change.busy_acknowledged
    checks.integrity_acknowledged = "integrity_acknowledged" in (change.params or {})
    # The change under review is no other job: only a different queued or running one counts.
    if checks.active_job is not None and checks.active_job.pk == change.pk:
        checks.problems = [p for p in checks.problems if f"change #{change.pk} " not in p]
    return checks
