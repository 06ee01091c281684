"""Fault 3: PostgreSQL drops the application's connections.

From a superuser connection of its own, the test terminates the backends the application holds
(pg_terminate_backend), as a failover or a restart of the server does, and for a while refuses
new ones. Pages must say what happened instead of showing a traceback, and come back by
themselves; a job must not go on past a step whose audit event could not be written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.core.signals import request_finished, request_started
from django.db import connection
from psycopg import sql

from controlplane.audit.actions import AuditAction
from deployments.choices import ChangeStatus, StepStatus
from deployments.models import HostLease
from deployments.tasks import execute_change
from tests.chaos.conftest import (
    AuditGate,
    dsn,
    http_get,
    require_postgresql,
    session_for,
    terminate_backend,
)
from tests.chaos.jobs import (
    DESTRUCTIVE,
    audited_commands,
    host_commands,
    parked,
    request_swap,
    thread,
    verify_audit,
)
from tests.fleet import register
from tests.waiting import wait_for_change

pytestmark = [pytest.mark.chaos, pytest.mark.integration]


@pytest.fixture
def database_outage(transactional_db: None) -> Iterator[Any]:
    """`outage.start()`: every connection to the test database terminated, new ones refused
    (as while a server restarts); `outage.end()`: accepted again. Always ended afterwards."""
    require_postgresql()
    name = connection.settings_dict["NAME"]
    su = psycopg.connect(dsn("postgres"), autocommit=True)

    class Outage:
        def start(self) -> int:
            su.execute(
                sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(sql.Identifier(name))
            )
            return self.drop()

        def drop(self) -> int:
            rows = su.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                [name],
            ).fetchall()
            return len(rows)

        def end(self) -> None:
            su.execute(
                sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(sql.Identifier(name))
            )
            connection.close()  # this process's own connection was terminated too

    outage = Outage()
    try:
        yield outage
    finally:
        outage.end()
        su.close()


PAGES = ["/", "/hosts/gpu-01/", "/changes/", "/audit/"]


def test_pages_say_the_database_is_unavailable_and_recover(
    live_server: Any, registered_fleet: Any, operator: Any, database_outage: Any
) -> None:
    session = session_for(operator)
    for path in PAGES:
        assert http_get(live_server.url + path, session)[0] == 200, path

    # Connections dropped between requests: the next request opens a new one.
    assert database_outage.drop() >= 1
    for path in PAGES:
        assert http_get(live_server.url + path, session)[0] == 200, path

    # Dropped, and refused for a while: a page in words, not a traceback.
    database_outage.start()
    for path in PAGES:
        status, kind, body = http_get(live_server.url + path, session)
        assert status == 503, (path, status, body[:300])
        assert kind.startswith("text/html")
        assert "database" in body.lower() and "try again" in body.lower(), body
        for leak in ("Traceback", "OperationalError", "psycopg", 'File "'):
            assert leak not in body, (path, leak)
    status, kind, body = http_get(live_server.url + "/api/v1/hosts/", session, "application/json")
    assert status == 503 and kind.startswith("application/json"), (status, kind, body[:300])
    assert json.loads(body)["code"] == "database_unavailable"

    # Back: the same pages answer again, with nothing restarted.
    database_outage.end()
    for path in PAGES:
        assert http_get(live_server.url + path, session)[0] == 200, path


def test_a_kept_connection_dropped_between_requests_is_replaced(database_outage: Any) -> None:
    """A gunicorn worker keeps its connection between requests (settings: DB_CONN_MAX_AGE);
    one the server dropped in between is replaced when the next request starts, not found
    broken by its first query. The signals are the ones Django sends around every request."""
    assert connection.settings_dict["CONN_MAX_AGE"] > 0
    request_started.send(sender=None)
    kept = _backend_pid()
    request_finished.send(sender=None)
    request_started.send(sender=None)
    assert _backend_pid() == kept  # kept between requests

    request_finished.send(sender=None)
    assert database_outage.drop() >= 1
    request_started.send(sender=None)
    assert _backend_pid() != kept
    request_finished.send(sender=None)


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def test_a_job_does_not_go_past_a_step_whose_audit_event_was_lost(
    make_fleet: Any, chaos_worker: Any, operator: Any, approver: Any, tmp_path: Path,
    audit_gate: AuditGate,
) -> None:  # fmt: skip
    """The worker's connection is terminated while it writes the end of `write unit file`:
    the unit file is on the host, but the step's event is lost. The job must stop there (no
    daemon-reload, no restart) and say so; the log still names the command it sent."""
    fleet = register(make_fleet(1))
    with parked():
        change = request_swap(operator, approver, fleet.deployments[0])
    fleet.clear_command_log("gpu-01")
    audit_gate.hold()
    execute_change.apply_async((change.pk,), queue=chaos_worker.queue)
    write = 6  # check fresh, check approval, lease, re-probe, baseline, write unit file
    backend = audit_gate.run_to_step_end(change.pk, write, explain=chaos_worker.output)
    assert change.steps.get(seq=write).name.startswith("write unit file")
    terminate_backend(backend)
    audit_gate.release()

    change = wait_for_change(change, timeout=30)
    assert change.status == ChangeStatus.FAILED, (change.status, change.status_reason)
    assert "database" in change.status_reason, change.status_reason
    sent = host_commands(fleet.command_log("gpu-01"))
    assert [c for c in sent if any(d in c for d in DESTRUCTIVE)] == [sent[-1]], sent
    assert "tee --" in sent[-1]
    assert audited_commands(change) == sent
    ended = next(e for e in thread(change) if e.action == AuditAction.CHANGE_FAILED)
    assert [s["name"] for s in ended.data["unfinished_steps"]] == [change.steps.get(seq=write).name]
    assert not change.steps.filter(status=StepStatus.RUNNING).exists()
    assert change.steps.order_by("seq").last().seq == write
    assert HostLease.objects.get(host=change.host).holder is None
    verified = verify_audit(tmp_path / "checkpoints")
    assert verified.returncode == 0, verified.stdout + verified.stderr
