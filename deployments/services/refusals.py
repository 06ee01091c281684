"""The refusal every change rule raises, and the small checks most of them start with."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import ValidationError

from controlplane.accounts.roles import has_role
from controlplane.audit import reasons
from controlplane.refusals import Refused
from hosts import services as host_services
from hosts.models import Host


class ChangeRefused(Refused):
    """A rule refused a change. `code` is one of: stale, forbidden, conflict, invalid.

    `shown_in` names the card of the change form that already says it (the snapshot, the
    target, the pre-flight), so the page does not say it twice, or "reason": a form shows it
    beside the reason typed; None: only the refusal does.
    """

    shown_in: str | None = None


@contextmanager
def shown_in(card: str) -> Iterator[None]:
    """Refusals raised inside say what the form's `card` shows (see ChangeRefused.shown_in)."""
    try:
        yield
    except ChangeRefused as exc:
        exc.shown_in = exc.shown_in or card
        raise


def stale(exc: host_services.SnapshotNotUsable) -> ChangeRefused:
    refused = ChangeRefused(exc.message, code="stale", age_seconds=exc.age_seconds, limit=exc.limit)
    refused.shown_in = "snapshot"
    return refused


def require_role(
    user: Any, role: str, action: str, host: Host | None = None, missing: str = "No such host."
) -> None:
    """`role` on `host` (hosts.services.host_role_require: a host outside the user's scope is
    not found, with `missing`), or without a host anywhere: the first gate, which pages and
    the API ask before they read any input."""
    if host is None:
        if not has_role(user, role):
            raise ChangeRefused(f"{action} needs the {role} role", code="forbidden")
        return
    try:
        host_services.host_role_require(
            user=user, host=host, roles=[role], doing=action, missing=missing
        )
    except host_services.HostRefused as exc:
        raise ChangeRefused(exc.message, code=exc.code, **exc.details) from exc


def require_reason(reason: str, what: str, *, minimum: int = 1) -> str:
    """The reason as words (controlplane.audit.reasons), or a refusal that a form shows beside
    its reason field (`shown_in` "reason")."""
    try:
        return reasons.validate_reason(reason, what=what, minimum=minimum)
    except ValidationError as exc:
        refused = ChangeRefused(exc.messages[0])
        refused.shown_in = "reason"
        raise refused from exc


def require_stored_rows_valid(deployment: Any, model: Any = None) -> None:
    """Rows written before a validator tightened, or by hand in the database, are checked again
    before anything is rendered for a host: a refusal naming each field, never a command built
    from them (and never a 500)."""
    problems = []
    rows = [("deployment", deployment), ("model", deployment.model)]
    if model is not None and model.pk != deployment.model_id:
        rows.append(("target model", model))
    for label, row in rows:
        try:
            row.full_clean(
                exclude=_adopted_fields(row), validate_unique=False, validate_constraints=False
            )
        except ValidationError as exc:
            for field, messages in sorted(exc.message_dict.items()):
                problems.append(f"{label} {field}: {' '.join(messages)}")
    if problems:
        raise ChangeRefused(
            "stored fields fail today's checks, so nothing is built from them: "
            f"{'; '.join(problems)}. An administrator fixes them in the admin.",
            code="invalid",
            fields=problems,
        )


def _adopted_fields(row: Any) -> list[str]:
    """A deployment's extra arguments, when they are its current revision's: those are what
    the host ran when the unit was adopted (a JSON `--speculative-config`, say), or what a
    request that passed today's checks asked for, never a hand edit of the row. Checking them
    against the alphabet for typed arguments would refuse every later change, a restart
    included, of a unit the control plane itself wrote."""
    current = getattr(row, "current_revision", None)
    if current is not None and row.extra_args == current.extra_args:
        return ["extra_args"]
    return []
