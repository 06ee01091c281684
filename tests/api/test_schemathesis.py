"""Schemathesis against the API in-process: requests generated from the served OpenAPI
schema, valid and invalid, as an administrator and as a viewer. None may answer with a 5xx.

Every operation gets its own examples, half of them with path parameters pinned to rows
that exist, so the fuzzer reaches the serializers and services behind the 404s.
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from controlplane.api import services as token_services
from controlplane.audit import services as audit
from deployments import services as change_services
from deployments.rollouts import requests as rollout_requests
from hosts import dispatch
from tests import factories as f

pytestmark = pytest.mark.django_db

SCHEMA = "/api/v1/schema/?format=json"
# Examples per operation and generation mode; the run stays well under a minute. For a deeper
# search set API_FUZZ_EXAMPLES (e.g. 200) and expect it to take a while.
DEEP = int(os.environ.get("API_FUZZ_EXAMPLES", "0"))
EXAMPLES = {"admin_user": DEEP or 6, "viewer": DEEP or 3}


@pytest.fixture
def rows(operator, catalog):
    """A bit of everything for pinned path parameters. The host's port has no SSH server, so
    a generated "probe now" fails fast as unreachable."""
    host = f.make_host("gpu-01", port=1)
    deployment = f.make_deployment(host, catalog["NVFP4"])
    snapshot = f.make_snapshot(host)
    change = change_services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap", snapshot=snapshot,
        reason="faster", model=catalog["INT4"],
    )  # fmt: skip
    event = audit.record(action="test.event", actor="system:test", host=host, data={"i": 1})
    rollout = rollout_requests.rollout_create(
        user=operator, kind="restart", reason="new driver", hosts=[host], wave_size=1, max_down=1
    )
    return {
        "/api/v1/hosts/": {"name": host.name},
        "/api/v1/snapshots/": {"id": snapshot.pk},
        "/api/v1/deployments/": {"id": deployment.pk},
        "/api/v1/models/": {"id": catalog["INT4"].pk},
        "/api/v1/changes/": {"id": change.pk},
        "/api/v1/rollouts/": {"id": rollout.pk},
        "/api/v1/audit/events/": {"seq": event.seq},
    }


@pytest.fixture
def wsgi_app():
    """Django's WSGI application, in this process and this test's transaction. The end of a
    request normally closes the database connection (the test client avoids that too)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def no_broker(monkeypatch):
    """A queued probe goes nowhere: the fuzzer must not feed a shared Redis."""
    monkeypatch.setattr(dispatch, "send", lambda *args, **kwargs: None)


def pinned(operation, rows):
    names = {p.name for p in operation.path_parameters}
    for prefix, values in rows.items():
        if operation.path.startswith(prefix) and names & set(values):
            return {k: v for k, v in values.items() if k in names}
    return None


@pytest.mark.parametrize("persona", ["admin_user", "viewer"])
def test_no_generated_request_gets_a_server_error(request, persona, rows, no_broker, wsgi_app):
    user = request.getfixturevalue(persona)
    token = token_services.token_create(user=user, name="schemathesis").secret
    auth = {"Authorization": f"Bearer {token}"}
    schema = schemathesis.openapi.from_wsgi(SCHEMA, wsgi_app, headers=auth)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    statuses: dict[int, int] = {}

    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            strategies = [operation.as_strategy(generation_mode=mode)]
            if (path_parameters := pinned(operation, rows)) is not None:
                strategies.append(
                    operation.as_strategy(generation_mode=mode, path_parameters=path_parameters)
                )

            @given(case=st.one_of(strategies))
            @settings(
                max_examples=EXAMPLES[persona],
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def fuzz(case):
                response = case.call(app=wsgi_app, headers=auth)
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                case.validate_response(response, checks=[not_a_server_error], headers=auth)

            fuzz()

    assert not [code for code in statuses if code >= 500], statuses
    # The requests got past authentication and reached the views.
    assert statuses.get(401, 0) < sum(statuses.values()) / 4, statuses
    assert statuses.get(200, 0) > 0, statuses
