"""Who is acting and under which correlation id, carried through the call stack.

A request (middleware), a management command or a Celery task sets the context once; every
audit event written inside it picks up the actor, client address and correlation id.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class AuditContext:
    actor: Any = None  # a User or a "system:..." name
    correlation_id: str = ""
    ip: str | None = None
    user_agent: str = ""


# AuditContext is frozen, so one shared default instance cannot be mutated through.
_current: ContextVar[AuditContext] = ContextVar("audit_context", default=AuditContext())  # noqa: B039


def current() -> AuditContext:
    return _current.get()


def new_correlation_id() -> str:
    return uuid.uuid4().hex


@contextlib.contextmanager
def acting(
    actor: Any = None, *, correlation_id: str | None = None, **fields: Any
) -> Iterator[AuditContext]:
    """Run a block as `actor`, keeping whatever the outer context set and was not overridden."""
    outer = _current.get()
    ctx = replace(
        outer,
        actor=actor if actor is not None else outer.actor,
        correlation_id=correlation_id or outer.correlation_id or new_correlation_id(),
        **fields,
    )
    token = _current.set(ctx)
    try:
        yield ctx
    finally:
        _current.reset(token)
