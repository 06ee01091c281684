"""Asking to drain first through the API: the hook by its name, a bounded deadline, and bad
input a 400 naming the field (the service's rules: tests/deployments/test_drain_requests.py)."""

from __future__ import annotations

import pytest

from deployments.choices import DrainHookKind
from deployments.models import ChangeRequest, DrainHook
from tests import factories as f

CHANGES = "/api/v1/changes/"


@pytest.fixture
def hook(db) -> DrainHook:
    return DrainHook.objects.create(
        name="lb",
        kind=DrainHookKind.COMMAND,
        drain_command="/usr/local/bin/lb-drain out --backend {host}",
        undrain_command="/usr/local/bin/lb-drain in --backend {host}",
    )


def api_request(client, deployment, **body):
    body = {
        "deployment_id": deployment.pk,
        "kind": "restart",
        "snapshot_id": f.make_snapshot(deployment.host).pk,
        "reason": "patch",
        **body,
    }
    return client.post(CHANGES, body, format="json")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "start", "drain_hook": "lb"}, "drain_hook"),
        ({"drain_hook": "no-such-hook"}, "drain_hook"),
        ({"drain_hook": "lb", "drain_deadline_seconds": 0}, "drain_deadline_seconds"),
        ({"drain_hook": "lb", "drain_deadline_seconds": "soon"}, "drain_deadline_seconds"),
        ({"drain_deadline_seconds": 60}, "drain_deadline_seconds"),
        ({"drain_hook": ["lb"]}, "drain_hook"),
    ],
)
def test_the_api_answers_bad_drain_input_with_a_400_naming_the_field(
    api_for, operator, deployment, hook, body, field
) -> None:
    response = api_request(api_for(operator), deployment, **body)
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert not ChangeRequest.objects.exists()


def test_the_api_requests_a_drained_change_by_the_hooks_name(
    api_for, operator, deployment, hook
) -> None:
    client = api_for(operator)
    hooks = client.get("/api/v1/drain-hooks/").json()["results"]
    assert [(h["name"], h["drain"]) for h in hooks] == [
        ("lb", "/usr/local/bin/lb-drain out --backend {host}")
    ]
    response = api_request(client, deployment, drain_hook="lb", drain_deadline_seconds=120)
    assert response.status_code == 201, response.content
    change = client.get(f"{CHANGES}{response.json()['id']}/").json()
    assert change["params"]["drain"]["deadline_seconds"] == 120
    assert change["drain_state"] == ""


def test_a_disabled_hook_is_refused_through_the_api_too(api_for, operator, deployment, hook):
    DrainHook.objects.filter(pk=hook.pk).update(enabled=False)
    response = api_request(api_for(operator), deployment, drain_hook="lb")
    assert response.status_code == 400, response.content
    assert "disabled" in response.json()["detail"]
