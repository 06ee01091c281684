"""Where people see the stream: the audit page's card, `manage.py audit_stream status|send`."""

from __future__ import annotations

import json
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from controlplane.audit.models import AuditChainHead, AuditStreamCursor
from controlplane.audit.streaming import delivery
from tests.audit.conftest import make_events

from .conftest import destination

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("postgresql")]


@pytest.fixture
def two_streams(tmp_path: Path, use_streams: Callable[..., None]) -> tuple[Any, Any]:
    archive = destination(kind="file", path=str(tmp_path / "audit.jsonl"))
    broken = destination(kind="file", path=str(tmp_path / "nowhere" / "audit.jsonl"))
    broken = type(archive)(**{**broken.__dict__, "name": "broken"})
    use_streams(archive, broken)
    make_events(3)
    delivery.stream_deliver(destination=archive)
    delivery.stream_deliver(destination=broken)
    return archive, broken


def test_the_audit_page_shows_each_destinations_cursor_lag_and_error(
    client: Any, viewer: Any, two_streams: tuple[Any, Any], tmp_path: Path
) -> None:
    client.force_login(viewer)
    page = client.get("/audit/").content.decode()
    assert 'id="audit-streams"' in page
    assert f"file://{tmp_path}/audit.jsonl" in page
    delivered = AuditStreamCursor.objects.get(name="siem").delivered_seq
    head = AuditChainHead.objects.get().seq
    assert f"#{delivered} of #{head}" in page
    assert f"{head - delivered} events, oldest" in page
    assert "No such file or directory" in page
    assert "failing" in page


def test_no_streams_no_card(client: Any, viewer: Any, settings: Any) -> None:
    settings.AUDIT_STREAMS = ()
    client.force_login(viewer)
    assert 'id="audit-streams"' not in client.get("/audit/").content.decode()


def test_status_says_how_far_each_destination_got(two_streams: tuple[Any, Any]) -> None:
    out = StringIO()
    call_command("audit_stream", "status", stdout=out)
    text = out.getvalue()
    assert "siem file file://" in text
    assert "broken file" in text and "failing (1 attempts): " in text
    assert "No such file or directory; next try in" in text

    out = StringIO()
    call_command("audit_stream", "status", "--json", stdout=out)
    rows = {r["name"]: r for r in map(json.loads, out.getvalue().splitlines())}
    assert rows["broken"]["delivered_seq"] == 0
    assert rows["broken"]["lag_events"] == rows["broken"]["head_seq"]
    assert rows["siem"]["last_error"] == ""


def test_send_now_ignores_the_backoff_and_fails_with_the_error(
    two_streams: tuple[Any, Any],
) -> None:
    with pytest.raises(CommandError, match=r"broken: failed, 0 sent: .*No such file"):
        call_command("audit_stream", "send", "broken")
    assert AuditStreamCursor.objects.get(name="broken").attempts == 2
    out = StringIO()
    call_command("audit_stream", "send", "siem", stdout=out)
    assert out.getvalue().startswith("siem: caught_up, 1 sent")
    with pytest.raises(CommandError, match="no audit stream named 'nope'"):
        call_command("audit_stream", "send", "nope")
