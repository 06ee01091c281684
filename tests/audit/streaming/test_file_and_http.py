"""JSON Lines to a file (appended, fsync'd, rotation-safe) and to a real local HTTP collector
(batches, an outage, a receiver that took a batch but said it did not, TLS, a redirect), and a
collector's token that never shows anywhere but in its request."""

from __future__ import annotations

import json
import logging
import ssl
import threading
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from controlplane.audit.models import AuditEvent, AuditStreamCursor
from controlplane.audit.streaming import delivery, selectors
from tests.audit.conftest import make_events

from .conftest import assert_continuous, destination
from .receivers import Collector, Pki

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("postgresql")]

TOKEN = "Bearer hec-7f3a9c1d2e4b5a6f"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# --- a file --------------------------------------------------------------------------------------


def test_jsonl_file_gets_every_event_once_and_survives_rotation(
    tmp_path: Path, use_streams: Callable[..., None]
) -> None:
    path = tmp_path / "audit.jsonl"
    archive = destination(kind="file", path=str(path), batch_size=2)
    use_streams(archive)
    make_events(3)
    assert delivery.stream_deliver(destination=archive).status == "caught_up"
    assert [r["seq"] for r in _lines(path)] == [1, 2, 3, 4]

    path.rename(tmp_path / "audit.jsonl.1")  # logrotate's default: rename, then a new file
    make_events(2)
    assert delivery.stream_deliver(destination=archive).status == "caught_up"

    rotated, current = _lines(tmp_path / "audit.jsonl.1"), _lines(path)
    assert [r["seq"] for r in current] == [5, 6]
    assert assert_continuous(rotated + current) == []
    # canonical JSON, one record per line, UTF-8 unescaped
    raw = (tmp_path / "audit.jsonl.1").read_text(encoding="utf-8").splitlines()[0]
    assert raw == json.dumps(rotated[0], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert "ü" in raw
    assert oct(path.stat().st_mode & 0o777) == "0o640"


def test_a_line_cut_short_by_a_crash_does_not_swallow_the_next_record(
    tmp_path: Path, use_streams: Callable[..., None]
) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b'{"schema":"controlplane.audit/v1","seq":1,"crea')
    archive = destination(kind="file", path=str(path))
    use_streams(archive)
    make_events(2)

    delivery.stream_deliver(destination=archive)

    lines = path.read_text().splitlines()
    assert lines[0].endswith('"crea')
    assert [json.loads(line)["seq"] for line in lines[1:]] == [1, 2, 3]


def test_a_file_that_cannot_be_written_fails_clearly_and_keeps_the_cursor(
    tmp_path: Path, use_streams: Callable[..., None]
) -> None:
    archive = destination(kind="file", path=str(tmp_path / "missing" / "audit.jsonl"))
    use_streams(archive)
    make_events(1)

    outcome = delivery.stream_deliver(destination=archive)

    assert outcome.status == "failed"
    assert outcome.error == f"{tmp_path / 'missing' / 'audit.jsonl'}: No such file or directory"
    assert AuditStreamCursor.objects.get(name="siem").delivered_seq == 0


def test_the_check_the_reference_gives_receivers_accepts_the_stream_and_catches_an_edit(
    tmp_path: Path, use_streams: Callable[..., None]
) -> None:
    readme = Path(__file__).resolve().parents[3] / "controlplane/audit/streaming/README.md"
    check = readme.read_text().split("```python\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "audit.jsonl"
    archive = destination(kind="file", path=str(path))
    use_streams(archive)
    make_events(3)
    delivery.stream_deliver(destination=archive)

    exec(check.replace("/var/log/controlplane/audit.jsonl", str(path)), {})

    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace('"actor":"system:test-1"', '"actor":"mallory"')
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(AssertionError, match="#2 altered"):
        exec(check.replace("/var/log/controlplane/audit.jsonl", str(path)), {})


# --- an HTTP collector ---------------------------------------------------------------------------


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "collector-authorization"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return path


def test_batches_are_posted_as_json_lines_with_the_collectors_token(
    collector: Collector, token_file: Path, use_streams: Callable[..., None]
) -> None:
    lake = destination(
        kind="http", url=collector.url, authorization_file=str(token_file), batch_size=3
    )
    use_streams(lake)
    make_events(4)

    assert delivery.stream_deliver(destination=lake).status == "caught_up"

    assert len(collector.batches) == 2
    headers, _ = collector.batches[0]
    assert headers["Content-Type"] == "application/x-ndjson"
    assert headers["Authorization"] == TOKEN
    assert headers["X-Controlplane-Audit-Schema"] == "controlplane.audit/v1"
    assert [h["X-Controlplane-Audit-Seq"] for h, _ in collector.batches] == ["1-3", "4-5"]
    assert assert_continuous(collector.records()) == []


def test_an_outage_keeps_the_cursor_and_a_batch_taken_but_refused_comes_again_flagged(
    collector: Collector, use_streams: Callable[..., None]
) -> None:
    lake = destination(kind="http", url=collector.url)
    use_streams(lake)
    make_events(2)

    collector.status = 503
    down = delivery.stream_deliver(destination=lake)
    assert down.status == "failed"
    assert down.error.startswith(f"http://127.0.0.1:{collector.port}/… answered HTTP 503")
    assert AuditStreamCursor.objects.get(name="siem").delivered_seq == 0

    # A collector that stored the batch yet answered an error (it timed out writing, say): the
    # batch comes again, flagged, and the receiver can tell.
    collector.status = 200
    collector.batches.clear()
    AuditStreamCursor.objects.update(next_attempt_at=None)  # the backoff has passed
    assert delivery.stream_deliver(destination=lake).status == "caught_up"
    assert [r["redelivery"] for r in collector.records()] == [True, True, True]
    assert AuditStreamCursor.objects.get(name="siem").redelivered == 3


def test_a_redirect_is_not_followed(collector: Collector, use_streams: Callable[..., None]) -> None:
    collector.status, collector.location = 302, "http://elsewhere.example/"
    lake = destination(kind="http", url=collector.url)
    use_streams(lake)
    make_events(1)

    outcome = delivery.stream_deliver(destination=lake)

    assert outcome.status == "failed"
    assert "a redirect, not followed" in outcome.error
    assert collector.batches == []


@pytest.fixture
def https_collector(pki: Pki) -> Iterator[Collector]:
    collector = Collector()
    collector.server.shutdown()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    server: ThreadingHTTPServer = collector.server
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    collector.url = collector.url.replace("http://", "https://")
    yield collector
    collector.close()


def test_https_verifies_the_collector_against_the_ca_file(
    https_collector: Collector, pki: Pki, other_pki: Pki, use_streams: Callable[..., None]
) -> None:
    make_events(2)
    untrusted = destination(kind="http", url=https_collector.url, ca_file=str(other_pki.ca))
    use_streams(untrusted)
    refused = delivery.stream_deliver(destination=untrusted)
    assert refused.status == "failed" and "is not trusted" in refused.error
    assert https_collector.batches == []

    trusted = destination(kind="http", url=https_collector.url, ca_file=str(pki.ca))
    use_streams(trusted)
    assert delivery.stream_deliver(destination=trusted, force=True).status == "caught_up"
    assert [r["seq"] for r in https_collector.records()] == [1, 2, 3]


def test_the_collectors_token_shows_nowhere_but_in_its_request(
    collector: Collector,
    token_file: Path,
    use_streams: Callable[..., None],
    caplog: pytest.LogCaptureFixture,
    client: Any,
    viewer: Any,
) -> None:
    lake = destination(kind="http", url=collector.url, authorization_file=str(token_file))
    use_streams(lake)
    make_events(1)
    caplog.set_level(logging.DEBUG)
    client.force_login(viewer)

    def places() -> dict[str, str]:
        page = client.get("/audit/").content.decode()
        assert "siem" in page
        return {
            "logs": caplog.text,
            "stream": json.dumps(collector.records()),
            "audit log": json.dumps(list(AuditEvent.objects.values_list("data", flat=True))),
            "status": json.dumps([s.as_dict() for s in selectors.stream_statuses()]),
            "page": page,
            "cursor": json.dumps(list(AuditStreamCursor.objects.values()), default=str),
        }

    collector.status = 401  # refused: the error is kept, shown and logged
    delivery.stream_deliver(destination=lake)
    failing = places()
    collector.status = 200
    delivery.stream_deliver(destination=lake, force=True)
    taken = places()

    secret = TOKEN.split()[1]
    assert collector.batches[0][0]["Authorization"] == TOKEN
    assert "answered HTTP 401" in failing["status"]
    leaks = [where for seen in (failing, taken) for where, text in seen.items() if secret in text]
    assert leaks == []


def test_an_unreadable_token_file_fails_clearly(
    collector: Collector, tmp_path: Path, use_streams: Callable[..., None]
) -> None:
    lake = destination(kind="http", url=collector.url, authorization_file=str(tmp_path / "nope"))
    use_streams(lake)
    make_events(1)

    outcome = delivery.stream_deliver(destination=lake)

    assert outcome.error == f"authorization_file {tmp_path / 'nope'}: No such file or directory"
    assert collector.batches == []
