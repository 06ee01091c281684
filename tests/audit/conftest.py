"""Fixtures for the audit log's tests: an isolated checkpoint directory, a way to tamper with
the table the way someone with database access would, and the PostgreSQL requirement."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from controlplane.audit import services
from controlplane.audit.chain import canonical_json
from controlplane.audit.models import AuditEvent


@pytest.fixture(autouse=True)
def checkpoint_dir(settings: Any, tmp_path: Path) -> Path:
    """Every test signs into its own directory, never the developer's."""
    path = tmp_path / "audit-checkpoints"
    settings.AUDIT_CHECKPOINT_DIR = path
    return path


def require_postgresql() -> None:
    """Behaviour that only PostgreSQL has (row locks across connections, TRUNCATE triggers).
    In CI (CI=true) a missing PostgreSQL is a failure, never a silent skip."""
    if connection.vendor == "postgresql":
        return
    message = f"needs PostgreSQL (DATABASE_URL); this run uses {connection.vendor}"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@contextlib.contextmanager
def triggers_disabled() -> Iterator[None]:
    """What a database superuser can do: switch the append-only triggers off, then on again."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("ALTER TABLE audit_auditevent DISABLE TRIGGER USER")
            try:
                yield
            finally:
                cursor.execute("ALTER TABLE audit_auditevent ENABLE TRIGGER USER")
        else:
            cursor.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
                "AND tbl_name = 'audit_auditevent'"
            )
            triggers = cursor.fetchall()
            assert triggers, "the SQLite append-only triggers are missing"
            for name, _ in triggers:
                cursor.execute(f'DROP TRIGGER "{name}"')
            try:
                yield
            finally:
                for _, sql in triggers:
                    cursor.execute(sql)


def tamper(sql: str, params: list[Any] | None = None) -> None:
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute(sql, params or [])


def make_events(count: int, **fields: Any) -> list[AuditEvent]:
    """Events with varied, awkward content: quotes, unicode, nested data, nulls, floats."""
    out = []
    for i in range(count):
        out.append(
            services.record(
                action=fields.get("action", "test.event"),
                actor=fields.get("actor", f"system:test-{i % 3}"),
                target=("hosts.host", str(i), f'gpu-{i} "quoted" ü'),
                data={"i": i, "nested": {"z": [1, 2.5, None], "a": "line\nbreak\\"}, "ok": True},
                correlation_id=fields.get("correlation_id"),
            )
        )
    return out


def rewrite_event(seq: int, *, recompute: bool, **changes: Any) -> str:
    """Change an event the way an attacker with database access would; with `recompute`, also
    give it a hash that matches its new content (as a careful attacker would). Returns that
    hash, or the unchanged one."""
    from controlplane.audit.chain import HASHED_FIELDS, event_hash

    event = AuditEvent.objects.get(seq=seq)
    fields = {name: getattr(event, name) for name in HASHED_FIELDS}
    fields.update(changes)
    new_hash = event_hash(fields) if recompute else event.hash
    assignments = [f"{name} = %s" for name in changes] + ["hash = %s"]
    values = [canonical_json(v) if name == "data" else v for name, v in changes.items()] + [
        new_hash
    ]
    tamper(f"UPDATE audit_auditevent SET {', '.join(assignments)} WHERE seq = %s", [*values, seq])
    return new_hash


def recompute_chain_from(seq: int, **changes: Any) -> str:
    """Edit event `seq`, then re-hash it and every later event and move the head row: the
    chain is internally perfect again. Only a checkpoint can tell. Returns the new head hash."""
    from controlplane.audit.chain import HASHED_FIELDS, event_hash

    prev = AuditEvent.objects.get(seq=seq).prev_hash
    last = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first() or 0
    with triggers_disabled(), connection.cursor() as cursor:
        for n in range(seq, last + 1):
            event = AuditEvent.objects.get(seq=n)
            fields = {name: getattr(event, name) for name in HASHED_FIELDS}
            if n == seq:
                fields.update(changes)
            fields["prev_hash"] = prev
            prev = event_hash(fields)
            cursor.execute(
                "UPDATE audit_auditevent SET actor = %s, data = %s, prev_hash = %s, hash = %s "
                "WHERE seq = %s",
                [fields["actor"], canonical_json(fields["data"]), fields["prev_hash"], prev, n],
            )
        cursor.execute(
            "UPDATE audit_auditchainhead SET seq = %s, hash = %s WHERE id = 1", [last, prev]
        )
    return prev


def cut_newest(keep: int) -> None:
    """Delete every event after `keep` and move the head row back, hiding the cut."""
    head_hash = AuditEvent.objects.get(seq=keep).hash if keep else "0" * 64
    tamper("DELETE FROM audit_auditevent WHERE seq > %s", [keep])
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE audit_auditchainhead SET seq = %s, hash = %s WHERE id = 1", [keep, head_hash]
        )
