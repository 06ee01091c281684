"""Nobody rewrites the log quietly: the model refuses, and so does the database itself."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from controlplane.audit.models import AuditEvent, AuditLogIsAppendOnly

from .conftest import make_events, require_postgresql


def test_the_model_refuses_to_update_or_delete(db: None) -> None:
    (event,) = make_events(1)
    event.actor = "someone else"
    with pytest.raises(AuditLogIsAppendOnly):
        event.save()
    with pytest.raises(AuditLogIsAppendOnly):
        event.delete()
    with pytest.raises(AuditLogIsAppendOnly):
        AuditEvent.objects.filter(seq=event.seq).update(actor="x")
    with pytest.raises(AuditLogIsAppendOnly):
        AuditEvent.objects.filter(seq=event.seq).delete()
    assert AuditEvent.objects.get(seq=event.seq).actor == "system:test-0"


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE audit_auditevent SET actor = 'mallory' WHERE seq = 1",
        "DELETE FROM audit_auditevent WHERE seq = 1",
        "UPDATE audit_auditevent SET data = '{}'",
        "DELETE FROM audit_auditevent",
    ],
)
def test_the_database_refuses_raw_update_and_delete(db: None, sql: str) -> None:
    make_events(2)
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(sql)
    assert AuditEvent.objects.count() == 2
    assert AuditEvent.objects.get(seq=1).actor == "system:test-0"


def test_postgresql_refuses_truncate(db: None) -> None:
    require_postgresql()
    make_events(2)
    with (
        pytest.raises(DatabaseError, match="TRUNCATE refused"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("TRUNCATE audit_auditevent")
    with (
        pytest.raises(DatabaseError, match="TRUNCATE refused"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("TRUNCATE audit_auditevent, audit_auditchainhead")
    assert AuditEvent.objects.count() == 2


def test_postgresql_triggers_are_installed_for_update_delete_and_truncate(db: None) -> None:
    require_postgresql()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = 'audit_auditevent'::regclass "
            "AND NOT tgisinternal AND tgenabled = 'O' ORDER BY tgname"
        )
        names = [row[0] for row in cursor.fetchall()]
    assert names == ["audit_event_no_truncate", "audit_event_no_update"]


def test_inserting_is_still_allowed(db: None) -> None:
    make_events(3)
    assert list(AuditEvent.objects.order_by("seq").values_list("seq", flat=True)) == [1, 2, 3]
