"""Asking to drain first: which kinds may (their declaration), what a request may choose (an
enabled hook from the administrator's list, a deadline within bounds), what it binds to, and
the same rules through the service, the change form and the API."""

from __future__ import annotations

import pytest

from controlplane.audit.models import AuditEvent
from deployments import kinds, services
from deployments.choices import ChangeKind, DrainHookKind
from deployments.execution.drift import execution_drift
from deployments.models import ChangeRequest, DrainHook
from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def hook(db) -> DrainHook:
    return DrainHook.objects.create(
        name="lb",
        kind=DrainHookKind.COMMAND,
        drain_command="/usr/local/bin/lb-drain out --backend {host}",
        undrain_command="/usr/local/bin/lb-drain in --backend {host}",
    )


def busy(host, running: float = 4):
    return f.make_snapshot(host, parsed=f.parsed_state(running=running))


def request(operator, deployment, snapshot, kind="restart", **kwargs):
    return services.change_request_create(
        user=operator, deployment=deployment, kind=kind, snapshot=snapshot,
        reason="pick up the new driver", **kwargs,
    )  # fmt: skip


# --- the declaration ------------------------------------------------------------------------


def test_every_kind_that_drops_requests_in_flight_may_drain_and_no_other() -> None:
    assert kinds.kinds_where("may_drain") == kinds.kinds_where("drops_inflight")
    assert ChangeKind.START not in kinds.kinds_where("may_drain")


def test_the_rules_refuse_drain_on_a_kind_that_may_not() -> None:
    errors = kinds.request_field_errors(
        ChangeKind.START, model=False, shaped=[], benchmark=False, drain=True
    )
    assert set(errors) == {"drain_hook"}
    assert "A start does not drain" in errors["drain_hook"]
    for kind in kinds.kinds_where("may_drain"):
        declared = kinds.spec(kind)
        assert "drain_hook" not in kinds.request_field_errors(
            kind, model=declared.takes_model, shaped=[], benchmark=False, drain=True
        )


# --- the service ----------------------------------------------------------------------------


def test_a_drained_restart_on_a_busy_server_waits_instead_of_asking(
    operator, deployment, host, hook
) -> None:
    with pytest.raises(services.ChangeRefused, match="4 requests in flight"):
        request(operator, deployment, busy(host))  # without draining: drops them, so asks
    change = request(operator, deployment, busy(host), drain_hook=hook)
    assert change.params["drain"] == {
        "hook": hook.pk,
        "hook_name": "lb",
        "hook_digest": hook.digest(),
        "deadline_seconds": 300,
    }
    assert not change.busy_acknowledged  # nothing acknowledged: the deadline ends the job
    requested = AuditEvent.objects.get(action="change.requested")
    assert requested.data["drain"] == change.params["drain"]
    assert not AuditEvent.objects.filter(action="change.busy_acknowledged").exists()


def test_acknowledging_busy_servers_is_for_what_still_runs_at_the_deadline(
    operator, deployment, host, hook
) -> None:
    change = request(
        operator, deployment, f.make_snapshot(host), drain_hook=hook,
        drain_deadline_seconds=60, acknowledge_busy=True,
    )  # fmt: skip
    assert change.busy_acknowledged  # even on an idle server: it may be busy at the deadline
    event = AuditEvent.objects.get(action="change.busy_acknowledged")
    assert event.data["at_drain_deadline"] == 60


@pytest.mark.parametrize(
    ("arguments", "field", "says"),
    [
        ({"drain_deadline_seconds": 4}, "drain_deadline_seconds", "5 to 3600 seconds"),
        ({"drain_deadline_seconds": 3601}, "drain_deadline_seconds", "5 to 3600 seconds"),
        ({"drain_deadline_seconds": True}, "drain_deadline_seconds", "5 to 3600 seconds"),
    ],
)
def test_a_deadline_out_of_bounds_is_refused(
    operator, deployment, host, hook, arguments, field, says
) -> None:
    with pytest.raises(services.ChangeRefused, match=says) as refused:
        request(operator, deployment, f.make_snapshot(host), drain_hook=hook, **arguments)
    assert field in refused.value.details["fields"]
    assert not ChangeRequest.objects.exists()


def test_a_deadline_without_a_hook_a_disabled_hook_and_a_start_are_refused(
    operator, deployment, host, hook
) -> None:
    snapshot = f.make_snapshot(host)
    with pytest.raises(services.ChangeRefused, match="needs a drain hook"):
        request(operator, deployment, snapshot, drain_deadline_seconds=60)
    with pytest.raises(services.ChangeRefused, match="A start does not drain"):
        request(operator, deployment, snapshot, kind="start", drain_hook=hook)
    DrainHook.objects.filter(pk=hook.pk).update(enabled=False)
    hook.refresh_from_db()
    with pytest.raises(services.ChangeRefused, match="lb is disabled"):
        request(operator, deployment, snapshot, drain_hook=hook)
    assert not ChangeRequest.objects.exists()


def test_an_approval_binds_to_the_hook_and_its_deadline(
    operator, deployment, host, hook, catalog
) -> None:
    change = request(
        operator, deployment, f.make_snapshot(host), kind="model_swap", model=catalog["INT4"],
        drain_hook=hook,
    )  # fmt: skip
    digest = services.change_params_digest(change)
    change.params["drain"]["deadline_seconds"] = 3600
    assert services.change_params_digest(change) != digest


def test_requests_in_flight_at_execution_are_no_drift_for_a_drained_change(
    operator, deployment, host, hook
) -> None:
    idle = f.make_snapshot(host)
    now_busy = busy(host, running=7)
    plain = request(operator, deployment, idle)
    fields = [d["field"] for d in execution_drift(change=plain, basis=idle, current=now_busy)]
    assert fields == [f"{deployment.unit} requests in flight"]
    ChangeRequest.objects.all().delete()
    drained = request(operator, deployment, idle, drain_hook=hook)
    assert execution_drift(change=drained, basis=idle, current=now_busy) == []


# --- the change form ------------------------------------------------------------------------


def form_url(deployment, kind: str) -> str:
    return f"/deployments/{deployment.pk}/change/{kind}/"


def test_the_form_offers_enabled_hooks_to_kinds_that_may_drain(client, operator, deployment, hook):
    DrainHook.objects.create(
        name="old-lb", kind=DrainHookKind.COMMAND, enabled=False,
        drain_command="/usr/local/bin/old out", undrain_command="/usr/local/bin/old in",
    )  # fmt: skip
    f.make_snapshot(deployment.host)
    client.force_login(operator)
    restart = client.get(form_url(deployment, "restart")).content.decode()
    assert 'name="drain_hook"' in restart and ">lb</option>" in restart
    assert "old-lb" not in restart
    assert 'name="drain_deadline_seconds"' in restart
    start = client.get(form_url(deployment, "start")).content.decode()
    assert 'name="drain_hook"' not in start and 'name="drain_deadline_seconds"' not in start


def test_the_form_refuses_a_deadline_out_of_bounds_and_an_unknown_hook(
    client, operator, deployment, hook
) -> None:
    snapshot = f.make_snapshot(deployment.host)
    client.force_login(operator)
    base = {"snapshot_id": snapshot.pk, "reason": "patch", "drain_hook": hook.pk}
    response = client.post(form_url(deployment, "restart"), {**base, "drain_deadline_seconds": 1})
    assert response.status_code == 400
    assert "greater than or equal to 5" in response.content.decode()
    response = client.post(form_url(deployment, "restart"), {**base, "drain_hook": 999})
    assert response.status_code == 400
    assert "Select a valid choice" in response.content.decode()
    assert not ChangeRequest.objects.exists()
    response = client.post(form_url(deployment, "restart"), base)
    assert response.status_code == 302
    assert ChangeRequest.objects.get().params["drain"]["hook_name"] == "lb"


def test_the_pre_flight_says_a_busy_server_is_waited_for(client, operator, deployment, hook):
    snapshot = busy(deployment.host, running=3)
    client.force_login(operator)
    url = form_url(deployment, "restart") + "preflight/"
    panel = client.post(url, {"snapshot_id": snapshot.pk, "drain_hook": hook.pk},
                        headers={"HX-Request": "true"}).content.decode()  # fmt: skip
    assert "The job drains the host first and waits for them" in panel
    assert "no blocking problem" in panel
