"""Appends are serialised: concurrent writers, each on its own database connection, never fork
the chain. Real threads, real PostgreSQL row locks, committed transactions."""

from __future__ import annotations

import itertools
import threading
from collections import Counter

import pytest
from django.db import connection, connections

from controlplane.audit import services
from controlplane.audit.chain import GENESIS_HASH
from controlplane.audit.models import AuditEvent
from controlplane.audit.verification import chain_verify

from .conftest import require_postgresql

WRITERS = 8
EACH = 1000


@pytest.mark.django_db(transaction=True)
def test_eight_concurrent_writers_leave_one_unbroken_chain() -> None:
    require_postgresql()
    start = threading.Barrier(WRITERS)
    errors: list[BaseException] = []
    backends: set[int] = set()

    def writer(n: int) -> None:
        try:
            with connection.cursor() as cursor:  # this thread's own connection
                cursor.execute("SELECT pg_backend_pid()")
                backends.add(cursor.fetchone()[0])
            start.wait()
            for i in range(EACH):
                services.record(action="test.concurrent", actor=f"system:writer-{n}", data={"i": i})
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert not errors, errors
    assert len(backends) == WRITERS  # truly separate connections, not one shared session
    rows = list(AuditEvent.objects.order_by("seq").values_list("seq", "prev_hash", "hash", "actor"))
    assert [seq for seq, *_ in rows] == list(range(1, WRITERS * EACH + 1))
    previous = GENESIS_HASH
    for _seq, prev_hash, hash_, _actor in rows:
        assert prev_hash == previous
        previous = hash_
    assert Counter(actor for *_, actor in rows) == {
        f"system:writer-{n}": EACH for n in range(WRITERS)
    }
    # the writers interleaved: otherwise this would not have tested contention at all
    switches = sum(1 for a, b in itertools.pairwise(rows) if a[3] != b[3])
    assert switches > WRITERS
    result = chain_verify()
    assert result.ok, result.reason
    assert (result.events, result.head_hash) == (WRITERS * EACH, previous)
