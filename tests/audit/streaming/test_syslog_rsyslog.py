"""The audit stream against a real rsyslog (Debian's rsyslogd and its GnuTLS driver): plain TCP
and TLS, the receiver stopped and restarted mid-stream, a crash between a send and the cursor's
move, a CA that does not vouch for the receiver, and a client certificate."""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.db import transaction
from django.utils import timezone

from controlplane.audit import services
from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditStreamCursor
from controlplane.audit.streaming import delivery, records
from controlplane.audit.streaming.errors import Deadline
from controlplane.audit.streaming.transports import sender_for
from controlplane.settings_parts.audit_streams import audit_streams
from tests.audit.conftest import make_events
from tests.workers import private_worker

from .conftest import assert_continuous, destination
from .receivers import Pki, Rsyslog

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db,
    pytest.mark.usefixtures("postgresql"),
]


def _syslog(receiver: Rsyslog, **fields: Any) -> Any:
    tls: dict[str, Any] = {"tls": False}
    if receiver.pki is not None:
        tls = {"ca_file": str(receiver.pki.ca)}
    base = {"kind": "syslog", "host": "127.0.0.1", "port": receiver.port}
    return destination(**{**base, "hostname": "cp.example.test", **tls, **fields})


def test_events_stream_to_rsyslog_over_tcp(
    rsyslog: Rsyslog, use_streams: Callable[..., None]
) -> None:
    make_events(7)
    siem = _syslog(rsyslog, batch_size=3)
    use_streams(siem)

    outcome = delivery.stream_deliver(destination=siem)

    assert outcome.status == "caught_up"
    got = rsyslog.wait_for(8)  # 7 events, and the stream's own "added" event first
    assert [r.seq for r in got] == list(range(1, 9))
    assert assert_continuous([r.record for r in got]) == []
    cursor = AuditStreamCursor.objects.get(name="siem")
    assert (cursor.delivered_seq, cursor.delivered_hash) == (8, got[-1].record["hash"])
    # RFC 5424 as rsyslog itself parsed it: facility 13 (log audit), MSGID the action, the
    # chain links in structured data, APP-NAME and HOSTNAME as configured.
    first = got[1]
    assert first.pri == 13 * 8 + records.Severity.NOTICE
    assert (first.hostname, first.app, first.procid) == ("cp.example.test", "gpu-controlplane", "-")
    assert first.msgid == "test.event"
    assert first.sd.startswith("[audit@32473 ")
    assert first.params == {
        "schema": "controlplane.audit/v1",
        "seq": "2",
        "hash": first.record["hash"],
        "prev_hash": got[0].record["hash"],
    }
    assert first.timestamp.startswith(first.record["created_at"][:19])
    assert first.record["data"]["nested"]["a"] == "line\nbreak\\"
    assert got[7].msgid == AuditAction.AUDIT_STREAM_ADDED


def test_events_stream_to_rsyslog_over_tls(
    rsyslog_tls: Rsyslog, use_streams: Callable[..., None]
) -> None:
    make_events(3)
    services.record(action=AuditAction.CHANGE_BREAK_GLASS, data={"reason": "pager at 3am"})
    siem = _syslog(rsyslog_tls)
    use_streams(siem)

    assert delivery.stream_deliver(destination=siem).status == "caught_up"

    got = rsyslog_tls.wait_for(5)
    assert [r.seq for r in got] == [1, 2, 3, 4, 5]
    assert_continuous([r.record for r in got])
    glass = got[3]
    assert glass.msgid == "change.break_glass"
    assert glass.pri == 13 * 8 + records.Severity.ALERT
    assert glass.record["severity"] == "alert"


def test_the_receiver_stopped_mid_stream_loses_nothing(
    rsyslog: Rsyslog, use_streams: Callable[..., None]
) -> None:
    make_events(5)
    siem = _syslog(rsyslog, batch_size=4, timeout=2)
    use_streams(siem)
    assert delivery.stream_deliver(destination=siem, max_batches=1).status == "more"
    assert len(rsyslog.wait_for(4)) == 4

    rsyslog.stop()
    make_events(6)
    down = delivery.stream_deliver(destination=siem)

    # The cursor waits where the receiver stopped taking events, and says why.
    assert down.status == "failed"
    assert "refused the connection" in down.error
    cursor = AuditStreamCursor.objects.get(name="siem")
    assert cursor.delivered_seq == 4
    assert cursor.attempts == 1
    assert "127.0.0.1:" in cursor.last_error
    assert cursor.next_attempt_at is not None
    # Backing off: a send before the retry is due does not try.
    assert delivery.stream_deliver(destination=siem).status == "waiting"

    rsyslog.start()
    with time_machine.travel(cursor.next_attempt_at, tick=True):
        resumed = delivery.stream_deliver(destination=siem)

    assert resumed.status == "caught_up"
    got = rsyslog.wait_for(12)
    assert sorted({r.seq for r in got}) == list(range(1, 13))
    assert assert_continuous([r.record for r in got]) == []
    cursor.refresh_from_db()
    assert (cursor.delivered_seq, cursor.attempts, cursor.last_error) == (12, 0, "")


def test_the_receiver_stopped_in_the_middle_of_a_batch_loses_nothing(
    rsyslog: Rsyslog, use_streams: Callable[..., None]
) -> None:
    services.record_many(
        [{"action": AuditAction.PROBE_COMPLETED, "data": {"n": n, "pad": "x" * 2000}}
         for n in range(400)]
    )  # fmt: skip
    siem = _syslog(rsyslog, batch_size=100, timeout=2)
    use_streams(siem)

    def stop_after(count: int) -> None:
        # Frozen as soon as the second batch starts to arrive (SIGSTOP takes effect at once),
        # then stopped: whatever it had not read when it closed the connection is answered
        # with a reset.
        while rsyslog.lines() < count:
            time.sleep(0.0005)
        rsyslog.freeze()
        rsyslog.stop()

    stopper = threading.Thread(target=stop_after, args=(101,))
    stopper.start()
    outcome = delivery.stream_deliver(destination=siem, max_batches=100)
    stopper.join(10)

    delivered = AuditStreamCursor.objects.get(name="siem").delivered_seq
    assert (outcome.status, delivered < 401) in {("failed", True), ("caught_up", False)}
    rsyslog.start()
    assert delivery.stream_deliver(destination=siem, force=True, max_batches=100).status == (
        "caught_up"
    )
    got = rsyslog.wait_for(401)
    again = assert_continuous([r.record for r in got])
    # Whatever came twice came flagged, and only what was sent after the cursor stood still.
    assert all(seq > delivered for seq in again)


@pytest.mark.django_db(transaction=True)
def test_an_append_kicks_a_real_worker_that_streams_it(
    rsyslog: Rsyslog, settings: Any, tmp_path: Path
) -> None:
    queue = f"test-audit-stream-{uuid.uuid4().hex[:12]}"
    streams = [{"name": "siem", "kind": "syslog", "host": "127.0.0.1", "port": rsyslog.port,
                "tls": False}]  # fmt: skip
    settings.AUDIT_STREAMS = audit_streams(json.dumps(streams))
    settings.AUDIT_STREAM_QUEUE = queue
    with private_worker(
        queue, tmp_path / "worker.log", AUDIT_STREAMS=json.dumps(streams), AUDIT_STREAM_QUEUE=queue
    ):
        with transaction.atomic():  # one kick for the transaction, after it commits
            services.record(action=AuditAction.AUTH_LOGIN, actor="alice")
            services.record(action=AuditAction.AUTH_LOGOUT, actor="alice")
        got = rsyslog.wait_for(3, timeout=30)
    assert [r.msgid for r in got] == ["auth.login", "auth.logout", "audit_stream.added"]
    assert_continuous([r.record for r in got])


def test_a_crash_between_send_and_cursor_update_resends_flagged(
    rsyslog: Rsyslog, use_streams: Callable[..., None]
) -> None:
    make_events(4)
    siem = _syslog(rsyslog, batch_size=3)
    use_streams(siem)
    delivery.cursor_ensure(destination=siem)
    # A worker claims the cursor, sends a batch, and dies before it can move the cursor.
    claim = delivery._claim(siem, force=False)
    assert isinstance(claim, delivery.Claim)
    batch = delivery.batch_prepare(claim, siem)
    sender_for(siem.kind)(siem, batch, Deadline(5))
    assert [r.seq for r in rsyslog.wait_for(3)] == [1, 2, 3]

    # Its lease runs out; the next worker sends from the cursor again.
    later = timezone.now() + dt.timedelta(seconds=delivery.lease_seconds(siem) + 1)
    with time_machine.travel(later, tick=True):
        assert delivery.stream_deliver(destination=siem).status == "caught_up"

    got = rsyslog.wait_for(8)
    assert [(r.seq, r.params.get("redelivery")) for r in got] == [
        (1, None), (2, None), (3, None),
        (1, "1"), (2, "1"), (3, "1"), (4, None), (5, None),
    ]  # fmt: skip
    assert assert_continuous([r.record for r in got]) == [1, 2, 3]
    assert AuditStreamCursor.objects.get(name="siem").redelivered == 3


def test_a_ca_that_does_not_vouch_for_the_receiver_fails_clearly_and_keeps_the_cursor(
    rsyslog_tls: Rsyslog, other_pki: Pki, use_streams: Callable[..., None]
) -> None:
    make_events(2)
    siem = _syslog(rsyslog_tls, ca_file=str(other_pki.ca))
    use_streams(siem)

    outcome = delivery.stream_deliver(destination=siem)

    assert outcome.status == "failed"
    cursor = AuditStreamCursor.objects.get(name="siem")
    assert cursor.delivered_seq == 0
    assert cursor.last_error.startswith(f"TLS: the certificate of 127.0.0.1:{rsyslog_tls.port}")
    assert "not trusted" in cursor.last_error
    assert f"ca_file {other_pki.ca}" in cursor.last_error
    assert rsyslog_tls.received() == []


def test_a_name_the_certificate_does_not_carry_is_refused(
    rsyslog_tls: Rsyslog, use_streams: Callable[..., None]
) -> None:
    make_events(1)
    siem = _syslog(rsyslog_tls, server_name="siem.example.net")
    use_streams(siem)

    outcome = delivery.stream_deliver(destination=siem)

    assert outcome.status == "failed"
    assert "not trusted" in outcome.error and "siem.example.net" in outcome.error
    assert rsyslog_tls.received() == []


def test_a_receiver_that_asks_for_a_client_certificate_gets_it(
    tmp_path: Path, pki: Pki, use_streams: Callable[..., None]
) -> None:
    receiver = Rsyslog(pki=pki, client_auth=True)
    try:
        receiver.start()
        make_events(2)
        anonymous = _syslog(receiver, timeout=2)
        use_streams(anonymous)
        refused = delivery.stream_deliver(destination=anonymous)
        assert refused.status == "failed"
        # Said within the wait after the handshake, or (on a very slow machine) later, as the
        # reset that answers the batch: either way it is not counted as taken.
        assert re.search(
            "did it refuse the client certificate|closed the connection before", refused.error
        )
        assert receiver.received() == []

        with_cert = _syslog(receiver, cert_file=str(pki.client_cert), key_file=str(pki.client_key))
        use_streams(with_cert)
        assert delivery.stream_deliver(destination=with_cert, force=True).status == "caught_up"
        assert [r.seq for r in receiver.wait_for(3)] == [1, 2, 3]
    finally:
        receiver.close()
