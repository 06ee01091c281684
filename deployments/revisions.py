"""Deployment revisions: rendering a unit, storing it immutably, and what a change would write."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Max

from . import engine_flags, serving_plan, units
from .choices import ChangeKind
from .models import ChangeRequest, Deployment, DeploymentRevision, ModelArtifact


@dataclass(frozen=True)
class RevisionContent:
    """Everything a new revision is made of, before it is stored."""

    model: ModelArtifact
    tensor_parallel_size: int
    max_model_len: int
    extra_args: tuple[str, ...]
    unit_text: str

    @property
    def plan(self) -> serving_plan.ServingPlan:
        return serving_plan.plan_from_unit_text(self.unit_text)


def revision_render(
    *,
    deployment: Deployment,
    model: ModelArtifact,
    tensor_parallel_size: int,
    max_model_len: int,
    extra_args: list[str] | tuple[str, ...],
    number: int,
) -> RevisionContent:
    """Render the unit a revision would write. Raises EngineArgRefused for reserved flags."""
    args = tuple(engine_flags.normalise_extra_args(list(extra_args)))
    text = units.render_unit(
        units.UnitSpec(
            unit=deployment.unit,
            engine=model.engine,
            engine_binary=deployment.engine_binary,
            model_path=model.path,
            served_name=model.served_name,
            tensor_parallel_size=tensor_parallel_size,
            max_model_len=max_model_len,
            port=deployment.port,
            bind_address=deployment.bind_address,
            extra_args=args,
            revision=number,
        )
    )
    return RevisionContent(model, tensor_parallel_size, max_model_len, args, text)


def next_revision_number(deployment: Deployment) -> int:
    return (deployment.revisions.aggregate(n=Max("number"))["n"] or 0) + 1


def revision_create(
    *,
    deployment: Deployment,
    content: RevisionContent,
    number: int,
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
        bind_address=deployment.bind_address,
        extra_args=list(content.extra_args),
        unit_text=content.unit_text,
        unit_sha256=units.unit_sha256(content.unit_text),
        created_by=created_by,
        created_from_change=change,
    )
    revision.full_clean()
    revision.save()
    return revision


def deployment_current_revision(deployment: Deployment) -> DeploymentRevision:
    """The revision believed to be deployed; the first time, adopt the deployment as revision 1."""
    if deployment.current_revision_id:
        assert deployment.current_revision is not None
        return deployment.current_revision
    number = next_revision_number(deployment)
    content = revision_render(
        deployment=deployment,
        model=deployment.model,
        tensor_parallel_size=deployment.tensor_parallel_size,
        max_model_len=deployment.max_model_len,
        extra_args=list(deployment.extra_args),
        number=number,
    )
    revision = revision_create(
        deployment=deployment, content=content, number=number, created_by="system:adopted"
    )
    Deployment.objects.filter(pk=deployment.pk).update(current_revision=revision)
    deployment.current_revision = revision
    return revision


def rollback_target(deployment: Deployment) -> DeploymentRevision | None:
    """The revision that was live before the current one."""
    current = deployment.current_revision
    if current is None or current.created_from_change is None:
        return None
    return current.created_from_change.from_revision


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

    @property
    def plan(self) -> serving_plan.ServingPlan:
        return serving_plan.plan_from_unit_text(self.unit_text)

    @property
    def writes_unit(self) -> bool:
        return self.content is not None or self.revision is not None


class NoRollbackTarget(Exception):
    """There is no earlier revision to roll back to."""


def change_target(
    *,
    deployment: Deployment,
    kind: str,
    model: ModelArtifact | None = None,
    tensor_parallel_size: int | None = None,
    max_model_len: int | None = None,
    extra_args: list[str] | None = None,
) -> ChangeTarget:
    """Raises EngineArgRefused (reserved flags) and NoRollbackTarget."""
    current = deployment_current_revision(deployment)
    if kind == ChangeKind.ROLLBACK:
        target = rollback_target(deployment)
        if target is None:
            raise NoRollbackTarget("there is no earlier revision to roll back to")
        return ChangeTarget(kind, current, target.model, target.unit_text, revision=target)
    if kind not in {ChangeKind.REDEPLOY, ChangeKind.MODEL_SWAP}:
        return ChangeTarget(kind, current, current.model, current.unit_text)
    number = next_revision_number(deployment)
    content = revision_render(
        deployment=deployment,
        model=model or current.model,
        tensor_parallel_size=tensor_parallel_size or current.tensor_parallel_size,
        max_model_len=max_model_len or current.max_model_len,
        extra_args=list(current.extra_args) if extra_args is None else extra_args,
        number=number,
    )
    return ChangeTarget(kind, current, content.model, content.unit_text, content, number)
