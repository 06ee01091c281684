"""Schemathesis against the JSON API, in-process through the WSGI application, for every operation
of the served OpenAPI schema and every role: anonymous, viewer, operator, approver, admin.

Requests are generated from the schema, valid ones (positive) and invalid ones (negative). None
may answer with a 5xx. A valid request that gets a 2xx must also answer what the schema says
(status code, content type, body). Path parameters are often pinned to rows that exist, and
ids in request bodies often point at them, so the fuzzer gets past the 404s and the "no such
row" 400s into the services: a change request on a real snapshot with generated extra
arguments, environment and reason, an approval, a rejection, a cancel. Text path parameters
(a host's name) are also tried with hostile values: a NUL byte PostgreSQL refuses, a trailing
newline, shell and path metacharacters.

Each request runs in a savepoint that is rolled back, so every one meets the same rows. The
host's SSH port has no server (a "probe now" fails fast as unreachable) and a queued probe lands
on a queue of this test's own that no worker reads.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from controlplane.api import services as token_services
from controlplane.audit import services as audit
from deployments import services as change_services
from tests import factories as f

pytestmark = pytest.mark.django_db

SCHEMA = "/api/v1/schema/?format=json"
PERSONAS = ("anonymous", "viewer", "operator", "approver", "admin")
# Examples per operation, role and generation mode. The whole file stays under a minute and a
# half on two cores; for a deeper search set API_FUZZ_EXAMPLES (e.g. 100) and expect a while.
DEEP = int(os.environ.get("API_FUZZ_EXAMPLES", "0"))
EXAMPLES = {"anonymous": 2, "viewer": 4, "operator": 6, "approver": 5, "admin": 6}


@dataclass
class World:
    users: dict[str, User | None]
    path_values: dict[str, dict[str, Any]]  # path prefix -> parameter values of real rows
    body_ids: dict[str, int]  # body field -> an id that exists


@pytest.fixture
def world(viewer, operator, approver, admin_user) -> World:
    catalog = f.make_catalog()
    host = f.make_host("gpu-01", port=1)  # nothing listens: SSH fails fast as unreachable
    deployment = f.make_deployment(host, catalog["NVFP4"])
    snapshot = f.make_snapshot(host)
    change = change_services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap", snapshot=snapshot,
        reason="INT4 serves more tokens per second", model=catalog["INT4"],
    )  # fmt: skip
    assert change.target_revision is not None
    profile = f.default_benchmark_profile()
    event = audit.record(action="test.event", actor="system:test", host=host, data={"i": 1})
    return World(
        users={
            "anonymous": None,
            "viewer": viewer,
            "operator": operator,
            "approver": approver,
            "admin": admin_user,
        },
        path_values={
            "/api/v1/hosts/": {"name": host.name},
            "/api/v1/snapshots/": {"id": snapshot.pk},
            "/api/v1/deployments/": {"id": deployment.pk, "number": change.from_revision.number},
            "/api/v1/models/": {"id": catalog["INT4"].pk},
            "/api/v1/benchmark-profiles/": {"id": profile.pk},
            "/api/v1/changes/": {"id": change.pk},
            "/api/v1/audit/events/": {"seq": event.seq},
        },
        body_ids={
            "deployment_id": deployment.pk,
            "snapshot_id": snapshot.pk,
            "model_id": catalog["INT4"].pk,
            "benchmark_profile_id": profile.pk,
        },
    )


@pytest.fixture
def wsgi_app() -> Iterator[Any]:
    """Django's WSGI application, in this process and this test's transaction. The end of a
    request normally closes the database connection (the test client avoids that too)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def path_parameters(operation: Any, world: World) -> dict[str, Any] | None:
    names = {p.name for p in operation.path_parameters}
    for prefix, values in world.path_values.items():
        if operation.path.startswith(prefix) and names and names <= set(values):
            return {k: v for k, v in values.items() if k in names}
    return None


# Text path parameters (a host's name) as an attacker types them: bytes the database refuses,
# shell and path metacharacters, a trailing newline a `$` lets through, far too long.
HOSTILE_NAMES = [
    "gpu\x00-01", "gpu-01\n", "..", "%", "$(reboot)", "gpu-01;reboot", "ĝpu-01", "\u202egpu",
    "x" * 300, "'\"", "*",
]  # fmt: skip


def hostile_path_parameters(operation: Any, world: World) -> list[dict[str, Any]]:
    """The pinned parameters with each text one replaced by a hostile value."""
    pinned = path_parameters(operation, world) or {}
    texts = [
        p.name
        for p in operation.path_parameters
        if p.definition.get("schema", {}).get("type") == "string"
    ]
    return [{**pinned, name: value} for name in texts for value in HOSTILE_NAMES]


def pin_body_ids(case: Any, world: World) -> None:
    """Ids in a JSON body pointed at rows that exist (the rest of the body as generated)."""
    if isinstance(case.body, dict):
        for name, pk in world.body_ids.items():
            if name in case.body:
                case.body[name] = pk


CONFORMANCE = [status_code_conformance, content_type_conformance, response_schema_conformance]


def test_every_operation_and_role_gets_no_server_error_and_what_the_schema_says(
    world: World,
    wsgi_app: Any,
    private_queue: str,
) -> None:
    admin_token = token_services.token_create(user=world.users["admin"], name="fuzz").secret
    schema = schemathesis.openapi.from_wsgi(
        SCHEMA, wsgi_app, headers={"Authorization": f"Bearer {admin_token}"}
    )
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    headers: dict[str, dict[str, str]] = {}
    for persona, user in world.users.items():
        if user is None:
            headers[persona] = {}
        else:
            secret = token_services.token_create(user=user, name=f"fuzz-{persona}").secret
            headers[persona] = {"Authorization": f"Bearer {secret}"}
    statuses: dict[tuple[str, int], int] = {}

    def fuzz(persona: str, strategy: st.SearchStrategy[Any], mode: GenerationMode) -> None:
        auth = headers[persona]

        @given(case=strategy, pin=st.booleans())
        @settings(
            max_examples=DEEP or EXAMPLES[persona],
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: Any, pin: bool) -> None:
            if pin:
                pin_body_ids(case, world)
            with transaction.atomic():
                response = case.call(app=wsgi_app, headers=auth)
                transaction.set_rollback(True)
            key = (persona, response.status_code)
            statuses[key] = statuses.get(key, 0) + 1
            checks = [not_a_server_error]
            if mode == GenerationMode.POSITIVE and 200 <= response.status_code < 300:
                checks += CONFORMANCE
            case.validate_response(response, checks=checks, headers=auth)

        check()

    for persona in PERSONAS:
        for operation in operations:
            pinned = path_parameters(operation, world)
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                strategies = [operation.as_strategy(generation_mode=mode)]
                if pinned is not None:
                    strategies.append(
                        operation.as_strategy(generation_mode=mode, path_parameters=pinned)
                    )
                if hostile := hostile_path_parameters(operation, world):
                    strategies.append(
                        st.sampled_from(hostile).flatmap(
                            lambda values, op=operation, mode=mode: op.as_strategy(
                                generation_mode=mode, path_parameters=values
                            )
                        )
                    )
                fuzz(persona, st.one_of(strategies), mode)

    assert not [key for key in statuses if key[1] >= 500], statuses
    # Every role reached the views: the anonymous were refused, the others got answers.
    assert {code for (who, code) in statuses if who == "anonymous"} <= {400, 401, 403, 404, 405}
    for persona in PERSONAS[1:]:
        assert statuses.get((persona, 200), 0) > 0, (persona, statuses)


@pytest.mark.parametrize("name", HOSTILE_NAMES)
@pytest.mark.parametrize("suffix", ["", "snapshots/", "snapshots/latest/"])
def test_a_hostile_host_name_is_a_404_not_a_database_error(
    world: World, name: str, suffix: str
) -> None:
    """What the fuzzer checks, as plain examples: the name never reaches a query."""
    client = APIClient()
    secret = token_services.token_create(user=world.users["viewer"], name="names").secret
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    response = client.get(f"/api/v1/hosts/{quote(name, safe='')}/{suffix}")
    assert response.status_code == 404, (name, response.status_code)
