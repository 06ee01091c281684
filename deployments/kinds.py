"""What each kind of change is, declared once: every place that used to branch on a kind reads
its declaration here instead (the request's rules, approval, snapshots, pre-flight, the job's
steps, verification, the verdict, the forms).

`spec(kind)` raises UnknownChangeKind for a kind that is not declared, so a kind added to
ChangeKind and forgotten here fails loudly instead of falling through to a restart.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .choices import ChangeKind

# What a model swap and a redeploy may reshape besides the model (the request's fields).
SHAPING_FIELDS = ("tensor_parallel_size", "max_model_len", "extra_args", "environment")


class UnknownChangeKind(ValueError):
    """A kind that has no declaration."""


@dataclass(frozen=True)
class KindSpec:
    kind: ChangeKind
    # How the unit is acted on once the job has done its own part: the systemctl verb, after
    # writing a revision (`writes_revision`) or reinstalling the engine (`reinstalls_engine`).
    systemctl: str
    # It writes a unit file: a new revision (`new_revision`) or an earlier one (rollback).
    writes_revision: bool = False
    new_revision: bool = False
    # It goes back to an earlier revision the deployment served: the request may name which
    # (`revision`), the one before the current one by default.
    chooses_revision: bool = False
    # It must come up healthy and coherent afterwards (and may be benchmarked).
    serves: bool = False
    # It needs a model from the catalog (a different one); only then may the request name one.
    takes_model: bool = False
    # It may reshape what serves (SHAPING_FIELDS).
    shapes: bool = False
    # Always needs a second person, whatever APPROVAL_REQUIRED_KINDS says.
    always_approved: bool = False
    # May rest on a partial snapshot when the requester acknowledges what is unknown: the
    # remedy for a GPU driver hiccup is often exactly this.
    partial_snapshot_ok: bool = False
    # Reinstalls the engine's package (pip as root), from a recent integrity check.
    reinstalls_engine: bool = False
    # In-flight requests are dropped by it (everything but a start of a stopped unit).
    drops_inflight: bool = True
    # May drain first: take the host out of its load balancer's rotation through a drain hook
    # and wait for the requests in flight to finish before its first destructive command, then
    # put it back after the change (deployments.execution.drain). Every kind that drops
    # requests in flight may: a redeploy and an engine repair restart the server like a swap
    # does (and a repair's pip rewrites the files a running server still imports from); a
    # start has nothing in flight to wait for.
    may_drain: bool = False
    # After it succeeded, an inactive unit is what was asked for (degraded "stopped"), not a
    # failure.
    leaves_unit_stopped: bool = False
    # What the change form says it does (after "verification": health, then the suite).
    verifies_before: bool = True  # the suite runs before the change too when the unit serves
    button: str = "primary"  # the form's submit button style

    @property
    def label(self) -> str:
        return str(self.kind.label)


KINDS: dict[str, KindSpec] = {
    spec.kind.value: spec
    for spec in (
        KindSpec(
            ChangeKind.STOP,
            systemctl="stop",
            may_drain=True,
            partial_snapshot_ok=True,
            leaves_unit_stopped=True,
            verifies_before=False,
            button="danger",
        ),
        KindSpec(ChangeKind.START, systemctl="start", serves=True, drops_inflight=False),
        KindSpec(
            ChangeKind.RESTART,
            systemctl="restart",
            serves=True,
            partial_snapshot_ok=True,
            may_drain=True,
        ),
        KindSpec(
            ChangeKind.REDEPLOY,
            systemctl="restart",
            may_drain=True,
            writes_revision=True,
            new_revision=True,
            serves=True,
            shapes=True,
        ),
        KindSpec(
            ChangeKind.MODEL_SWAP,
            systemctl="restart",
            may_drain=True,
            writes_revision=True,
            new_revision=True,
            serves=True,
            takes_model=True,
            shapes=True,
        ),
        KindSpec(
            ChangeKind.ROLLBACK,
            systemctl="restart",
            writes_revision=True,
            chooses_revision=True,
            serves=True,
            may_drain=True,
        ),
        KindSpec(
            ChangeKind.ENGINE_REPAIR,
            # The running engine keeps the code it loaded until it restarts.
            systemctl="restart",
            serves=True,
            always_approved=True,
            reinstalls_engine=True,
            may_drain=True,
        ),
    )
}


def spec(kind: str) -> KindSpec:
    try:
        return KINDS[kind]
    except KeyError:
        raise UnknownChangeKind(f"unknown change kind {kind!r}") from None


def kinds_where(flag: str) -> frozenset[str]:
    """The kinds whose declaration sets `flag`, e.g. kinds_where("serves")."""
    return frozenset(k for k, s in KINDS.items() if getattr(s, flag))


def request_field_errors(
    kind: str,
    *,
    model: bool,
    shaped: Iterable[str],
    benchmark: bool,
    revision: bool = False,
    drain: bool = False,
) -> dict[str, str]:
    """What a request of `kind` may not carry (or lacks), per field: the one copy of these
    rules, read by the service, the API serializer and the form."""
    declared = spec(kind)
    errors: dict[str, str] = {}
    if declared.takes_model and not model:
        errors["model"] = f"A {declared.label} needs the model to swap to."
    if model and not declared.takes_model:
        errors["model"] = "Only a model swap takes a model."
    if not declared.shapes:
        shapers = " and a ".join(s.label for s in KINDS.values() if s.shapes)
        for name in shaped:
            errors[name] = f"Only a {shapers} take this: a {declared.label} reshapes nothing."
    if benchmark and not declared.serves:
        errors["benchmark"] = f"A {declared.label} serves nothing to benchmark."
    if revision and not declared.chooses_revision:
        choosers = " and a ".join(s.label for s in KINDS.values() if s.chooses_revision)
        errors["revision"] = f"Only a {choosers} takes a revision to go back to."
    if drain and not declared.may_drain:
        drainers = ", ".join(s.label for s in KINDS.values() if s.may_drain)
        errors["drain_hook"] = (
            f"A {declared.label} does not drain: nothing is in flight to wait for (these may: "
            f"{drainers})."
        )
    return errors
