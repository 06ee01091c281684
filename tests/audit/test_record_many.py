"""Several events appended at once chain exactly like events appended one by one."""

from __future__ import annotations

from itertools import pairwise

import pytest

from controlplane.audit import services
from controlplane.audit.models import AuditChainHead, AuditEvent
from controlplane.audit.verification import chain_verify

pytestmark = pytest.mark.django_db


def test_a_batch_extends_the_chain_in_order_and_verifies(tmp_path, operator):
    services.record(action="before.batch", actor=operator)
    batch = services.record_many(
        [
            {"action": f"probe.completed.{i}", "actor": "system:beat", "data": {"i": i}}
            for i in range(5)
        ]
    )
    services.record(action="after.batch", actor=operator)
    events = list(AuditEvent.objects.order_by("seq"))
    assert [e.action for e in events][-7:] == [
        "before.batch",
        *[f"probe.completed.{i}" for i in range(5)],
        "after.batch",
    ]
    for previous, event in pairwise(events):
        assert event.prev_hash == previous.hash
        assert event.seq == previous.seq + 1
    assert [e.seq for e in batch] == [e.seq for e in events[-6:-1]]
    assert AuditChainHead.objects.get().hash == events[-1].hash
    result = chain_verify(checkpoint_path=tmp_path / "none.jsonl")
    assert result.ok, result


def test_an_empty_batch_writes_nothing():
    assert services.record_many([]) == []
    assert not AuditEvent.objects.exists()
