"""`record` is the one way in: it writes in the caller's transaction, copies labels so events
outlive what they name, takes actor and correlation id from the context, and keeps secrets out."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.db import transaction
from django.test import RequestFactory

from controlplane.audit import context, services
from controlplane.audit.chain import GENESIS_HASH, event_hash
from controlplane.audit.models import AuditChainHead, AuditEvent
from hosts.models import Host, StateSnapshot


def test_it_chains_events_from_the_genesis_hash(db: None) -> None:
    first = services.record(action="test.one", actor="system:test")
    second = services.record(action="test.two", actor="system:test")
    assert (first.seq, first.prev_hash) == (1, GENESIS_HASH)
    assert (second.seq, second.prev_hash) == (2, first.hash)
    stored = AuditEvent.objects.get(seq=2)
    fields = {f.name: getattr(stored, f.name) for f in AuditEvent._meta.concrete_fields}
    assert event_hash(fields) == stored.hash
    head = AuditChainHead.objects.get(pk=1)
    assert (head.seq, head.hash) == (2, second.hash)


def test_a_rolled_back_change_leaves_no_event(db: None) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        Host.objects.create(name="gpu-rollback", address="127.0.0.1")
        services.record(action="test.inside", actor="system:test")
        raise RuntimeError("the change fails")
    assert not AuditEvent.objects.filter(action__in=["host.created", "test.inside"]).exists()
    assert AuditChainHead.objects.get(pk=1).seq == AuditEvent.objects.count()
    after = services.record(action="test.after", actor="system:test")
    assert after.seq == AuditEvent.objects.count()


def test_it_copies_actor_target_and_host_labels(db: None, operator: User) -> None:
    host = Host.objects.create(name="gpu-labels", address="127.0.0.1")
    event = services.record(action="test.labels", actor=operator, target=host)
    assert (event.actor, event.actor_user_id) == ("otto", operator.pk)
    assert (event.target_type, event.target_id, event.target_label) == (
        "hosts.host",
        str(host.pk),
        "gpu-labels",
    )
    assert (event.host_id, event.host_label) == (host.pk, "gpu-labels")
    host_pk = host.pk
    host.delete()
    operator.delete()
    survivor = AuditEvent.objects.get(seq=event.seq)
    assert (survivor.actor, survivor.target_label, survivor.host_id) == (
        "otto",
        "gpu-labels",
        host_pk,
    )


def test_it_records_the_snapshot_its_digest_and_age(db: None) -> None:
    host = Host.objects.create(name="gpu-snap", address="127.0.0.1")
    taken = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC)
    snapshot = StateSnapshot.objects.create(
        host=host, taken_at=taken, status="ok", trigger="manual", duration_ms=5, digest="d" * 64
    )
    with time_machine.travel(taken + dt.timedelta(seconds=42.5), tick=False):
        event = services.record(
            action="change.requested", actor="system:test", snapshot=snapshot, host=host
        )
    assert (event.snapshot_id, event.snapshot_digest) == (snapshot.pk, "d" * 64)
    assert event.snapshot_age_seconds == 42.5
    assert event.created_at == taken + dt.timedelta(seconds=42.5)


def test_actor_and_correlation_id_come_from_the_context(db: None) -> None:
    with context.acting("system:worker", correlation_id="change-17"):
        inner = services.record(action="step.started")
        with context.acting("system:beat"):
            nested = services.record(action="probe.completed")
    outside = services.record(action="test.outside")
    assert (inner.actor, inner.correlation_id) == ("system:worker", "change-17")
    assert (nested.actor, nested.correlation_id) == ("system:beat", "change-17")
    assert outside.actor == "system:unknown"
    assert outside.correlation_id == ""


def test_an_explicit_correlation_id_wins(db: None) -> None:
    with context.acting("system:worker", correlation_id="outer"):
        event = services.record(action="test.x", correlation_id="explicit")
    assert event.correlation_id == "explicit"


def test_it_takes_address_and_agent_from_the_request(db: None) -> None:
    request = RequestFactory().get("/", REMOTE_ADDR="2001:0db8::0001", HTTP_USER_AGENT="curl/8\x00")
    event = services.record(action="test.request", actor="system:test", request=request)
    stored = AuditEvent.objects.get(seq=event.seq)
    assert stored.ip == "2001:db8::1"
    assert stored.user_agent == "curl/8"


def test_secret_looking_keys_are_redacted_at_any_depth(db: None) -> None:
    data: dict[str, Any] = {
        "password": "hunter2",
        "nested": [{"api_key": "k-123", "name": "kept"}],
        "private_key_encrypted": "gAAAA...",
        "token": "t",
    }
    event = services.record(action="test.secret", actor="system:test", data=data)
    stored = AuditEvent.objects.get(seq=event.seq)
    assert stored.data == {
        "password": "[redacted]",
        "nested": [{"api_key": "[redacted]", "name": "kept"}],
        "private_key_encrypted": "[redacted]",
        "token": "[redacted]",
    }


def test_data_is_stored_as_the_canonical_text_that_was_hashed(db: None) -> None:
    event = services.record(
        action="test.data", actor="system:test", data={"b": 1, "a": {"é": [1.0, None]}}
    )
    stored = AuditEvent.objects.filter(seq=event.seq).values_list("data", flat=True).get()
    assert stored == {"a": {"é": [1.0, None]}, "b": 1}
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT data FROM audit_auditevent WHERE seq = %s", [event.seq])
        assert cursor.fetchone()[0] == '{"a":{"é":[1.0,null]},"b":1}'


def test_time_never_runs_backwards_along_the_chain(db: None) -> None:
    with time_machine.travel(dt.datetime(2026, 3, 1, tzinfo=dt.UTC), tick=False):
        early = services.record(action="test.t", actor="system:test")
    with time_machine.travel(dt.datetime(2026, 3, 2, tzinfo=dt.UTC), tick=False):
        late = services.record(action="test.t", actor="system:test")
    assert early.seq < late.seq and early.created_at < late.created_at


def test_a_provider_users_events_name_their_issuer_and_subject(db: None, operator: User) -> None:
    from controlplane.accounts.models import Identity

    sso = User.objects.create_user("sso:ida")
    # an opaque subject that looks like a secret to the redaction is kept as it is
    subject = "00u1a2b3c4d5e6f7g8h9"
    Identity.objects.create(user=sso, issuer="https://idp.example.com", subject=subject)
    who = {"issuer": "https://idp.example.com", "subject": subject}
    direct = services.record(action="test.direct", actor=sso, data={"x": 1})
    with context.acting(sso):
        from_context = services.record(action="test.context")
    local = services.record(action="test.local", actor=operator)
    system = services.record(action="test.system", actor="system:test")
    assert direct.data == {"x": 1, "actor_identity": who}
    assert from_context.data == {"actor_identity": who}
    assert "actor_identity" not in local.data and "actor_identity" not in system.data
    stored = AuditEvent.objects.get(seq=direct.seq)
    fields = {f.name: getattr(stored, f.name) for f in AuditEvent._meta.concrete_fields}
    assert event_hash(fields) == stored.hash  # hashed with the rest
