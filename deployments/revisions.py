"""Deployment revisions: the unit file as it is on the host, stored immutably, and what a change
would write.

The first revision of a deployment is the unit the host already runs, adopted byte for byte
from the newest snapshot that read it (`systemctl cat`), with the variables its
EnvironmentFile= sets. A deployment the host does not have yet gets a rendered unit instead.
Every later revision rewrites its predecessor's command line and the Environment= values it
changes, and nothing else, so a rollback writes exactly the bytes of an earlier revision.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Max

from hosts.models import StateSnapshot

from . import kinds
from .choices import ChangeKind
from .models import ChangeRequest, Deployment, DeploymentRevision, ModelArtifact
from .rollback import rollback_revision
from .unit_files import engine_flags, serving_plan, units


@dataclass(frozen=True)
class RevisionContent:
    """Everything a new revision is made of, before it is stored."""

    model: ModelArtifact
    tensor_parallel_size: int
    max_model_len: int
    extra_args: tuple[str, ...]
    unit_text: str
    environment: dict[str, str] = field(default_factory=dict)
    file_variables: dict[str, str] = field(default_factory=dict)
    exact: bool = True  # False: adopted with secrets redacted, so it cannot be written back
    bind_address: str | None = None  # None: the deployment's; "" no --host (engine default)
    drain_grace: int = 0  # vLLM's --shutdown-timeout and the stop timeout it is written with

    @property
    def plan(self) -> serving_plan.ServingPlan:
        return serving_plan.plan_from_unit_text(self.unit_text, self.file_variables)


class UnitNotWritable(Exception):
    """The change would write a unit the control plane cannot write faithfully."""


def revision_render(
    *,
    deployment: Deployment,
    model: ModelArtifact,
    tensor_parallel_size: int,
    max_model_len: int,
    extra_args: list[str] | tuple[str, ...],
    number: int,
    base: DeploymentRevision | None = None,
    environment: dict[str, str] | None = None,
) -> RevisionContent:
    """The unit a revision would write: `base`'s unit with a new command line (and new
    Environment= values), or a new unit when there is no base. Raises EngineArgRefused for
    reserved flags and UnitNotWritable for a base adopted with its secrets redacted."""
    if base is not None:
        _require_engine_command_line(base)
    args = tuple(engine_flags.normalise_extra_args(list(extra_args)))
    env = dict(base.environment if base is not None and environment is None else environment or {})
    bind_address = deployment.bind_address
    spec = units.UnitSpec(
        unit=deployment.unit,
        engine=model.engine,
        engine_binary=deployment.engine_binary,
        model_path=model.path,
        served_name=model.served_name,
        tensor_parallel_size=tensor_parallel_size,
        max_model_len=max_model_len,
        port=deployment.port,
        bind_address=bind_address,
        extra_args=args,
        environment=tuple(sorted(env.items())),
        drain_grace=deployment.drain_grace_seconds,
    )
    if base is None:
        text = units.render_unit(spec)
        return RevisionContent(
            model,
            tensor_parallel_size,
            max_model_len,
            args,
            text,
            env,
            bind_address=bind_address,
            drain_grace=deployment.drain_grace_seconds,
        )
    if not base.exact_bytes:
        raise UnitNotWritable(
            f"revision {base.number} was adopted with secrets in the unit file (shown "
            "redacted here), so it cannot be rewritten faithfully: move them to an "
            "EnvironmentFile= on the host, probe it, and request the change again"
        )
    try:
        text = units.rewrite_unit(
            base.unit_text,
            exec_start_line=units.exec_start(spec),
            old_env=base.environment,
            new_env=env,
            unit=deployment.unit,
            drain_grace=deployment.drain_grace_seconds,
        )
    except units.UnitNotRewritable as exc:
        raise UnitNotWritable(f"revision {base.number}: {exc}") from exc
    return RevisionContent(
        model,
        tensor_parallel_size,
        max_model_len,
        args,
        text,
        env,
        dict(base.file_variables),
        bind_address=bind_address,
        drain_grace=deployment.drain_grace_seconds,
    )


def adopted_extra_args(plan: serving_plan.ServingPlan) -> tuple[str, ...]:
    """What an adopted command line sets beyond the deployment's own fields, as extra
    arguments, so that a later rewrite keeps it: every other flag, and the pipeline and data
    parallelism and GPU memory share the plan reads apart (they have no field of their own)."""
    sglang = plan.engine == "sglang"
    kept: list[str] = []
    if plan.pipeline_parallel_size != 1:
        kept.append(
            f"{'--pp-size' if sglang else '--pipeline-parallel-size'}={plan.pipeline_parallel_size}"
        )
    if plan.data_parallel_size != 1:
        kept.append(
            f"{'--dp-size' if sglang else '--data-parallel-size'}={plan.data_parallel_size}"
        )
    if plan.memory_fraction is not None:
        flag = "--mem-fraction-static" if sglang else "--gpu-memory-utilization"
        kept.append(f"{flag}={plan.memory_fraction:g}")
    kept += [f"{k}={v}" if v is not None else k for k, v in plan.flags.items()]
    return tuple(kept)


def _require_engine_command_line(base: DeploymentRevision) -> None:
    """Raises UnitNotWritable when `base`'s command line does not start an engine the control
    plane can read: rewriting it would drop what it does (a wrapper script, `bash -c`)."""
    if base.plan.engine != "unknown":
        return
    lines = [d for d in units.directives(base.unit_text) if d.key == "ExecStart"]
    raise UnitNotWritable(
        f"revision {base.number}'s command line does not start vLLM or SGLang directly "
        f"({lines[-1].describe() if lines else 'no ExecStart='}): rewriting it would drop what it "
        "does. Make ExecStart= run the engine itself, probe, and request the change again"
    )


def adopted_content(deployment: Deployment, snapshot: StateSnapshot) -> RevisionContent | None:
    """The unit `snapshot` read on the host, as revision content; None if it read none."""
    dep = snapshot.state().deployments.get(deployment.unit)
    if dep is None or not dep.unit_files:
        return None
    fragment = dep.unit_files[0]
    variables: dict[str, str] = {}
    for env_file in dep.environment_files:
        variables.update(env_file.variables)
    plan = serving_plan.plan_from_unit_text(fragment.text, variables)
    model = ModelArtifact.objects.filter(path=plan.model).first() if plan.model else None
    return RevisionContent(
        model=model or deployment.model,
        tensor_parallel_size=plan.tensor_parallel_size,
        max_model_len=plan.max_model_len or deployment.max_model_len,
        extra_args=adopted_extra_args(plan),
        unit_text=fragment.text,
        environment=units.environment_of(fragment.text),
        file_variables=variables,
        exact=units.unit_sha256(fragment.text) == fragment.sha256,
        bind_address=plan.host or "",
        drain_grace=_adopted_grace(plan),
    )


def _adopted_grace(plan: serving_plan.ServingPlan) -> int:
    """The drain grace an adopted unit runs with (its --shutdown-timeout, when the control
    plane can write it back: 0 when absent or out of the field's bounds)."""
    grace = plan.shutdown_timeout or 0
    return grace if 0 <= grace <= units.DRAIN_GRACE_MAX_SECONDS else 0


def next_revision_number(deployment: Deployment) -> int:
    return (deployment.revisions.aggregate(n=Max("number"))["n"] or 0) + 1


def revision_number_assign(revision: DeploymentRevision) -> int:
    """The revision's number, given now if it has none: right before its unit is first
    written, so that only revisions that reached the host are numbered. The deployment's row
    lock keeps two writers (there is one job per host) from taking the same number."""
    if revision.number is not None:
        return revision.number
    with transaction.atomic():
        deployment = Deployment.objects.select_for_update().get(pk=revision.deployment_id)
        number = next_revision_number(deployment)
        DeploymentRevision.objects.filter(pk=revision.pk, number__isnull=True).update(number=number)
    revision.refresh_from_db(fields=["number"])
    assert revision.number is not None
    return revision.number


def revision_create(
    *,
    deployment: Deployment,
    content: RevisionContent,
    number: int | None,
    created_by: str,
    change: ChangeRequest | None = None,
) -> DeploymentRevision:
    revision = DeploymentRevision(
        deployment=deployment,
        number=number,
        model=content.model,
        engine_binary=deployment.engine_binary,
        tensor_parallel_size=content.tensor_parallel_size,
        max_model_len=content.max_model_len,
        port=deployment.port,
        bind_address=(
            deployment.bind_address if content.bind_address is None else content.bind_address
        ),
        extra_args=list(content.extra_args),
        environment=content.environment,
        drain_grace_seconds=content.drain_grace,
        file_variables=content.file_variables,
        exact_bytes=content.exact,
        unit_text=content.unit_text,
        unit_sha256=units.unit_sha256(content.unit_text),
        created_by=created_by,
        created_from_change=change,
    )
    revision.full_clean(exclude=["extra_args"])  # adopted flags are what the host runs
    revision.save()
    return revision


def deployment_current_revision(
    deployment: Deployment, snapshot: StateSnapshot | None = None
) -> DeploymentRevision:
    """The revision believed to be deployed. The first time, adopt the unit the host runs (from
    `snapshot`, or the newest snapshot that read it), or render one if the host has none."""
    if deployment.current_revision_id:
        assert deployment.current_revision is not None
        return deployment.current_revision
    number = next_revision_number(deployment)
    source = snapshot or _newest_with_unit_files(deployment)
    content = adopted_content(deployment, source) if source is not None else None
    adopted = content is not None
    if content is None:
        content = revision_render(
            deployment=deployment,
            model=deployment.model,
            tensor_parallel_size=deployment.tensor_parallel_size,
            max_model_len=deployment.max_model_len,
            extra_args=list(deployment.extra_args),
            number=number,
            environment=dict(deployment.environment),
        )
    if adopted:
        _follow_the_unit(deployment, content)
    revision = revision_create(
        deployment=deployment,
        content=content,
        number=number,
        created_by="system:adopted from the host" if adopted else "system:rendered",
    )
    Deployment.objects.filter(pk=deployment.pk).update(current_revision=revision)
    deployment.current_revision = revision
    return revision


def _follow_the_unit(deployment: Deployment, content: RevisionContent) -> None:
    """An adopted unit is the truth about where its server listens: the deployment takes its
    bind address (none: the engine's default) and port, so no later change narrows or moves
    the server because a form's default said otherwise. A port another deployment of the
    host holds stays as it was (the port's checks will say so)."""
    plan = content.plan
    fields: dict[str, str | int] = {"bind_address": plan.host or ""}
    if content.drain_grace:  # its --shutdown-timeout, which the next rewrite keeps
        fields["drain_grace_seconds"] = content.drain_grace
    port = plan.port
    others = deployment.host.deployments.exclude(pk=deployment.pk)
    if port is not None and 1024 <= port <= 65535 and not others.filter(port=port).exists():
        fields["port"] = port
    Deployment.objects.filter(pk=deployment.pk).update(**fields)
    for name, value in fields.items():
        setattr(deployment, name, value)


def _newest_with_unit_files(deployment: Deployment) -> StateSnapshot | None:
    recent = deployment.host.snapshots.filter(status__in=["ok", "partial"]).order_by(
        "-taken_at", "-id"
    )[:5]
    for snapshot in recent:
        dep = snapshot.state().deployments.get(deployment.unit)
        if dep is not None and dep.unit_files:
            return snapshot
    return None


@dataclass(frozen=True)
class ChangeTarget:
    """What a change of `kind` would leave serving: a new revision's content, an earlier
    revision (rollback), or the current unit unchanged (stop, start, restart)."""

    kind: str
    current: DeploymentRevision
    model: ModelArtifact
    unit_text: str
    content: RevisionContent | None = None  # a new revision to store
    number: int | None = None
    revision: DeploymentRevision | None = None  # an existing revision to go back to
    file_variables: dict[str, str] = field(default_factory=dict)

    @property
    def plan(self) -> serving_plan.ServingPlan:
        return serving_plan.plan_from_unit_text(self.unit_text, self.file_variables)

    @property
    def writes_unit(self) -> bool:
        return self.content is not None or self.revision is not None


def change_target(
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
) -> ChangeTarget:
    """Raises EngineArgRefused (reserved flags), rollback.NoRollbackTarget (RevisionNotServed
    for a `revision` a rollback may not go back to) and UnitNotWritable."""
    current = deployment_current_revision(deployment, snapshot)
    variables = dict(current.file_variables)
    if kinds.spec(kind).chooses_revision:
        target = rollback_revision(deployment, current, revision)
        if not target.exact_bytes:
            raise UnitNotWritable(
                f"revision {target.number} was adopted with secrets redacted: it cannot be "
                "written back byte for byte"
            )
        # The control plane writes the unit file, not the environment files it names: after
        # the rollback they set what they set now.
        return ChangeTarget(
            kind,
            current,
            target.model,
            target.unit_text,
            revision=target,
            file_variables=variables,
        )
    if kind not in {ChangeKind.REDEPLOY, ChangeKind.MODEL_SWAP}:
        return ChangeTarget(
            kind, current, current.model, current.unit_text, file_variables=variables
        )
    number = next_revision_number(deployment)
    content = revision_render(
        deployment=deployment,
        model=model or current.model,
        tensor_parallel_size=tensor_parallel_size or current.tensor_parallel_size,
        max_model_len=max_model_len or current.max_model_len,
        extra_args=list(current.extra_args) if extra_args is None else extra_args,
        number=number,
        base=current,
        environment=environment,
    )
    return ChangeTarget(
        kind,
        current,
        content.model,
        content.unit_text,
        content,
        number,
        file_variables=variables,
    )
