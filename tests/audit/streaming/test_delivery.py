"""The stream's rules, each held by a test that fails without it: one sender per destination
(row lock and lease), nothing skipped (a gap or a broken link stops the stream), a send counts
only once the receiver read it all, a replay goes back only and is audited, the sweep audits
destinations coming and going, and an append kicks the stream once per transaction."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction

from controlplane.audit import services
from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent, AuditStreamCursor
from controlplane.audit.streaming import delivery, dispatch, records, syslog
from controlplane.audit.streaming.errors import Deadline, StreamSendError
from controlplane.audit.streaming.services import StreamRefused, stream_replay, streams_sweep
from tests.audit.conftest import make_events, tamper

from .conftest import destination

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("postgresql")]


@pytest.fixture
def archive(tmp_path: Path, use_streams: Callable[..., None]) -> Any:
    stream = destination(kind="file", path=str(tmp_path / "audit.jsonl"), batch_size=2)
    use_streams(stream)
    return stream


def _sent(stream: Any) -> list[tuple[int, bool]]:
    path = Path(stream.path)
    if not path.exists():
        return []
    import json

    return [(r["seq"], r["redelivery"]) for r in map(json.loads, path.read_text().splitlines())]


# --- one sender per destination ------------------------------------------------------------------


def test_a_second_worker_finds_the_destination_busy_while_one_holds_it(archive: Any) -> None:
    make_events(3)
    delivery.cursor_ensure(destination=archive)
    held = delivery._claim(archive, force=False)
    assert isinstance(held, delivery.Claim)

    assert delivery.stream_deliver(destination=archive).status == "busy"
    assert _sent(archive) == []


@pytest.mark.django_db(transaction=True)
def test_a_worker_does_not_wait_on_a_cursor_row_another_one_is_claiming(archive: Any) -> None:
    make_events(1)
    delivery.cursor_ensure(destination=archive)
    locked, release = threading.Event(), threading.Event()

    def other_worker() -> None:
        try:
            with transaction.atomic():
                AuditStreamCursor.objects.select_for_update().get(name="siem")
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=other_worker)
    thread.start()
    try:
        assert locked.wait(10)
        with connection.cursor() as cursor:  # waiting on the lock would fail the test here
            cursor.execute("SET lock_timeout = '3s'")
        assert delivery._claim(archive, force=False) == "busy"
    finally:
        release.set()
        thread.join(10)
    assert _sent(archive) == []


def test_a_worker_whose_lease_ran_out_cannot_move_the_cursor(archive: Any) -> None:
    make_events(3)
    delivery.cursor_ensure(destination=archive)
    stale = delivery._claim(archive, force=False)
    assert isinstance(stale, delivery.Claim)
    batch = delivery.batch_prepare(stale, archive)
    # Its lease lapses; another worker takes the cursor and sends everything.
    AuditStreamCursor.objects.update(lease_until=None)
    assert delivery.stream_deliver(destination=archive).status == "caught_up"
    done = AuditStreamCursor.objects.get(name="siem").delivered_seq

    assert delivery._advance(stale, batch, 0) is False
    assert AuditStreamCursor.objects.get(name="siem").delivered_seq == done


# --- nothing skipped ----------------------------------------------------------------------------


def test_a_missing_event_stops_the_stream_before_it(archive: Any) -> None:
    make_events(5)
    tamper("DELETE FROM audit_auditevent WHERE seq = 4")

    outcome = delivery.stream_deliver(destination=archive)

    assert outcome.status == "halted"
    assert outcome.error.startswith("event #4 is missing (the next stored is #5)")
    assert [seq for seq, _ in _sent(archive)] == [1, 2, 3]
    cursor = AuditStreamCursor.objects.get(name="siem")
    assert (cursor.delivered_seq, cursor.last_error) == (3, outcome.error)


def test_an_event_that_does_not_link_to_the_one_before_stops_the_stream(archive: Any) -> None:
    make_events(4)
    tamper("UPDATE audit_auditevent SET prev_hash = %s WHERE seq = 3", ["f" * 64])

    outcome = delivery.stream_deliver(destination=archive)

    assert outcome.status == "halted"
    assert outcome.error.startswith("event #3 does not link to #2")
    assert [seq for seq, _ in _sent(archive)] == [1, 2]


# --- a send counts once the receiver read it all ------------------------------------------------


def _peer(behaviour: Callable[[socket.socket], None]) -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            behaviour(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield port
    thread.join(5)
    server.close()


def _reads_nothing(conn: socket.socket) -> None:
    threading.Event().wait(0.3)  # the batch sits in its buffer, unread, when it closes


def _reads_a_little(conn: socket.socket) -> None:
    conn.recv(10)


def _reads_everything(conn: socket.socket) -> None:
    while conn.recv(65536):
        pass


def _batch(count: int) -> list[dict[str, Any]]:
    make_events(count)
    return [records.record_from_row(r, redelivery=False) for r in delivery.rows_after(0, count)]


@pytest.mark.parametrize("behaviour", [_reads_nothing, _reads_a_little])
def test_a_receiver_that_closes_without_reading_everything_has_not_taken_the_batch(
    behaviour: Callable[[socket.socket], None],
) -> None:
    batch = _batch(3)
    for port in _peer(behaviour):
        peer = destination(kind="syslog", host="127.0.0.1", port=port, tls=False, timeout=3)
        with pytest.raises(StreamSendError, match="closed the connection before it had read"):
            syslog.send(peer, batch, Deadline(6))


def test_a_receiver_that_reads_to_the_end_and_closes_has_taken_the_batch() -> None:
    batch = _batch(3)
    for port in _peer(_reads_everything):
        peer = destination(kind="syslog", host="127.0.0.1", port=port, tls=False, timeout=3)
        syslog.send(peer, batch, Deadline(6))


def test_a_receiver_that_never_closes_has_not_taken_the_batch_when_time_runs_out() -> None:
    batch = _batch(1)
    stop = threading.Event()
    for port in _peer(lambda conn: stop.wait(5)):
        peer = destination(kind="syslog", host="127.0.0.1", port=port, tls=False, timeout=0.3)
        with pytest.raises(StreamSendError, match="did not answer in time"):
            syslog.send(peer, batch, Deadline(0.6))
        stop.set()


# --- replay -------------------------------------------------------------------------------------


def test_a_replay_sends_again_from_a_seq_flagged_and_is_audited(archive: Any) -> None:
    make_events(4)
    delivery.stream_deliver(destination=archive)  # 1..4, and 5: the stream's "added"

    call_command("audit_stream", "replay", "siem", "--from-seq", "3", "--reason", "SIEM restored")

    replayed = AuditEvent.objects.get(action=AuditAction.AUDIT_STREAM_REPLAYED)
    assert replayed.actor == "system:cli"
    assert replayed.data["from_seq"] == 3
    assert replayed.data["previous_delivered_seq"] == 5
    assert replayed.data["reason"] == "SIEM restored"
    assert replayed.data["os_user"]  # who ran the command, as the machine knows them
    delivery.stream_deliver(destination=archive)
    assert _sent(archive)[5:] == [(3, True), (4, True), (5, True), (replayed.seq, False)]


@pytest.mark.parametrize(
    ("from_seq", "reason", "message"),
    [
        (9, "why", "a replay starts at #1 to #5 (it never skips ahead)"),
        (0, "why", "a replay starts at #1 to #5"),
        (2, "   ", "The reason for a replay needs visible text"),
    ],
)
def test_a_replay_that_would_skip_or_has_no_reason_is_refused(
    archive: Any, from_seq: int, reason: str, message: str
) -> None:
    make_events(4)
    delivery.stream_deliver(destination=archive)
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call_command(
            "audit_stream", "replay", "siem", "--from-seq", str(from_seq), "--reason", reason
        )
    assert AuditStreamCursor.objects.get(name="siem").delivered_seq == 5
    assert not AuditEvent.objects.filter(action=AuditAction.AUDIT_STREAM_REPLAYED).exists()


def test_a_replay_waits_for_a_send_under_way_and_names_only_configured_streams(
    archive: Any,
) -> None:
    make_events(2)
    delivery.stream_deliver(destination=archive)
    assert isinstance(delivery._claim(archive, force=False), delivery.Claim)
    with pytest.raises(StreamRefused, match="is being sent to right now"):
        stream_replay(name="siem", from_seq=1, actor="system:cli", reason="again")
    with pytest.raises(StreamRefused, match="no audit stream named 'other'"):
        stream_replay(name="other", from_seq=1, actor="system:cli", reason="again")


# --- destinations coming and going --------------------------------------------------------------


def test_the_sweep_audits_a_destination_once_when_it_comes_and_once_when_it_goes(
    archive: Any, settings: Any
) -> None:
    make_events(2)
    streams_sweep()
    streams_sweep()
    added = AuditEvent.objects.filter(action=AuditAction.AUDIT_STREAM_ADDED)
    assert [e.data for e in added] == [
        {"destination": "siem", "kind": "file", "where": archive.where(), "from_seq": 1}
    ]

    delivery.stream_deliver(destination=archive)
    settings.AUDIT_STREAMS = ()
    streams_sweep()
    streams_sweep()
    removed = AuditEvent.objects.filter(action=AuditAction.AUDIT_STREAM_REMOVED)
    assert [(e.actor, e.data["delivered_seq"]) for e in removed] == [("system:beat", 3)]

    settings.AUDIT_STREAMS = (archive,)
    streams_sweep()
    again = AuditEvent.objects.filter(action=AuditAction.AUDIT_STREAM_ADDED).order_by("seq")
    assert [e.data["from_seq"] for e in again] == [1, 4]  # it resumes where it stopped


def test_a_destination_that_starts_at_the_head_skips_the_history_and_says_so(
    tmp_path: Path, use_streams: Callable[..., None]
) -> None:
    make_events(3)
    fresh = destination(kind="file", path=str(tmp_path / "a.jsonl"), start="head")
    use_streams(fresh)
    delivery.stream_deliver(destination=fresh)
    assert [seq for seq, _ in _sent(fresh)] == [4]
    assert AuditEvent.objects.get(seq=4).data["from_seq"] == 4


# --- the kick after an append ---------------------------------------------------------------------


def test_an_append_kicks_the_stream_once_per_transaction(
    archive: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks() as callbacks, transaction.atomic():
        services.record(action=AuditAction.AUTH_LOGIN, actor="a")
        services.record(action=AuditAction.AUTH_LOGOUT, actor="a")
        services.record_many([{"action": AuditAction.PROBE_COMPLETED}] * 3)
    assert [c for c in callbacks if c is dispatch.kick] == [dispatch.kick]


def test_no_destination_no_kick(settings: Any, django_capture_on_commit_callbacks: Any) -> None:
    settings.AUDIT_STREAMS = ()
    with django_capture_on_commit_callbacks() as callbacks:
        services.record(action=AuditAction.AUTH_LOGIN, actor="a")
    assert dispatch.kick not in callbacks
