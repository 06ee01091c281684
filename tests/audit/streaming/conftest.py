"""Fixtures for the audit stream: destinations as AUDIT_STREAMS would parse them, real
receivers, and a check of a received stream against the chain."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controlplane.audit.chain import GENESIS_HASH
from controlplane.audit.streaming import records
from controlplane.celery import app
from controlplane.settings_parts.audit_streams import StreamDestination, audit_streams
from tests.audit.conftest import require_postgresql

from .receivers import Collector, Pki, Rsyslog, make_pki


@pytest.fixture
def postgresql() -> None:
    """The stream's cursor relies on row locks (SKIP LOCKED), which only PostgreSQL has."""
    require_postgresql()


def destination(**fields: Any) -> StreamDestination:
    """One destination, through the same parser as AUDIT_STREAMS (and its checks)."""
    return audit_streams(json.dumps([{"name": "siem", **fields}]))[0]


@pytest.fixture
def use_streams(settings: Any) -> Iterator[Callable[..., None]]:
    """Configure destinations; what the stream queues (a retry, the next batches) goes to a
    queue of the test's own on the real broker, deleted afterwards."""
    queue = f"test-audit-stream-{uuid.uuid4().hex[:12]}"
    settings.AUDIT_STREAM_QUEUE = queue

    def use(*destinations: StreamDestination) -> None:
        settings.AUDIT_STREAMS = tuple(destinations)

    yield use
    with app.connection_for_write() as conn:
        conn.default_channel.queue_delete(queue)


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="session")
def other_pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A second CA, which the receiver's certificate does not come from."""
    return make_pki(tmp_path_factory.mktemp("other-pki"), label="other")


@pytest.fixture
def rsyslog() -> Iterator[Rsyslog]:
    receiver = Rsyslog()
    yield receiver.start()
    receiver.close()


@pytest.fixture
def rsyslog_tls(pki: Pki) -> Iterator[Rsyslog]:
    receiver = Rsyslog(pki=pki)
    yield receiver.start()
    receiver.close()


@pytest.fixture
def collector() -> Iterator[Collector]:
    server = Collector()
    yield server
    server.close()


def assert_continuous(stream: list[dict[str, Any]], *, first: int = 1) -> list[int]:
    """Check a received stream as a receiver would: every record matches its hash, every seq
    from `first` on is there, each links to the one before, and a record that comes again is
    the same event and flagged as a redelivery. Returns the seqs received twice or more."""
    seen: dict[int, dict[str, Any]] = {}
    again: list[int] = []
    for record in stream:
        assert record["schema"] == records.SCHEMA
        assert records.hash_of(record) == record["hash"], f"#{record['seq']} fails its hash"
        seq = record["seq"]
        if seq in seen:
            assert record["redelivery"] is True, f"#{seq} came again without the flag"
            assert record["hash"] == seen[seq]["hash"]
            again.append(seq)
            continue
        seen[seq] = record
    seqs = sorted(seen)
    assert seqs == list(range(first, first + len(seqs))), f"missing seqs in {seqs}"
    previous = GENESIS_HASH if first == 1 else seen[first]["prev_hash"]
    for seq in seqs:
        assert seen[seq]["prev_hash"] == previous, f"#{seq} does not link to #{seq - 1}"
        previous = seen[seq]["hash"]
    return again
