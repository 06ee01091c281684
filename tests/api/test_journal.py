"""/api/v1/hosts/<name>/units/<unit>/journal/: the host page's journal, over real SSH to a
simulated host; audited; only deployed units, with names checked before any query."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from controlplane.audit.models import AuditEvent

pytestmark = pytest.mark.integration

UNIT = "vllm-kimi-k25.service"


def journal(client, unit=UNIT, host="gpu-01", **params):
    return client.get(f"/api/v1/hosts/{host}/units/{quote(unit, safe='')}/journal/", params)


def test_a_deployed_units_newest_lines(api_for, viewer, registered_fleet):
    response = journal(api_for(viewer), lines=3)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["host"] == "gpu-01" and body["unit"] == UNIT
    assert 1 <= len(body["lines"]) <= 3
    event = AuditEvent.objects.get(action="host.journal_read")
    assert event.actor == viewer.username and event.data["lines"] == 3


@pytest.mark.parametrize(
    ("unit", "status"),
    # A NUL byte would be refused by PostgreSQL inside the query (a 500): checked before it.
    [
        ("sshd.service", 404),
        ("x;reboot.service", 404),
        ("..", 404),
        ("a" * 300, 404),
        ("vllm\x00.service", 404),
    ],
)
def test_only_deployed_units_are_read(api_for, viewer, registered_fleet, unit, status):
    assert journal(api_for(viewer), unit=unit).status_code == status
    assert not AuditEvent.objects.filter(action="host.journal_read").exists()  # no SSH at all


def test_the_line_count_is_bounded(api_for, viewer, registered_fleet):
    assert journal(api_for(viewer), lines=0).status_code == 400
    assert journal(api_for(viewer), lines=1001).status_code == 400
    assert journal(api_for(viewer), host="gpu-99").status_code == 404


def test_an_unreachable_host_is_a_409_in_words(api_for, viewer, registered_fleet):
    registered_fleet.set_fault("gpu-01", "unreachable")
    response = journal(api_for(viewer))
    assert response.status_code == 409, response.content
    assert response.json()["code"] == "conflict"
    assert "Could not read the journal" in response.json()["detail"]
