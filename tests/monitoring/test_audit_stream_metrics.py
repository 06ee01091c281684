"""/metrics carries each audit stream destination's lag and failures, so an alert can say the
SIEM stopped getting the audit trail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controlplane.audit.streaming import delivery
from controlplane.settings_parts.audit_streams import audit_streams
from tests.audit.conftest import make_events, require_postgresql

pytestmark = pytest.mark.django_db


def test_lag_and_failures_per_destination(scrape: Any, settings: Any, tmp_path: Path) -> None:
    require_postgresql()
    settings.AUDIT_STREAM_QUEUE = "test-audit-stream-metrics-unused"
    settings.AUDIT_STREAMS = audit_streams(
        json.dumps(
            [
                {"name": "archive", "kind": "file", "path": str(tmp_path / "a.jsonl")},
                {"name": "down", "kind": "file", "path": str(tmp_path / "no" / "a.jsonl")},
            ]
        )
    )
    make_events(3)
    archive, down = settings.AUDIT_STREAMS
    delivery.stream_deliver(destination=archive)
    delivery.stream_deliver(destination=down)  # fails: its directory does not exist

    metrics = scrape()

    name = "controlplane_audit_stream_"
    assert metrics.value(f"{name}lag_events", destination="archive") == 1  # down's "added"
    assert metrics.value(f"{name}lag_events", destination="down") == 5
    assert metrics.value(f"{name}lag_seconds", destination="down") >= 0
    assert metrics.value(f"{name}delivered_seq", destination="archive") == 4
    assert metrics.value(f"{name}failing", destination="down") == 1
    assert metrics.value(f"{name}failing", destination="archive") == 0
    assert metrics.value(f"{name}failed_attempts", destination="down") == 1
    assert metrics.value(f"{name}redelivered_events", destination="archive") == 0
