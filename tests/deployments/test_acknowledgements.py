"""The change form asks only the acknowledgements that apply, each with the facts that make it
needed: the rule is the pre-flight's (deployments.services.preflight.change_acknowledgements),
the one the request refuses on, never the template's."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from deployments import services
from deployments.models import DrainHook
from deployments.services.preflight import change_acknowledgements
from tests import factories as f

pytestmark = pytest.mark.django_db
PATCHED = "vllm/model_executor/layers/fused_moe/fused_moe.py"
ACKNOWLEDGEMENTS = ("acknowledge_busy", "acknowledge_integrity", "acknowledge_unknown")


def partial_snapshot(host):
    parsed = f.parsed_state()
    parsed["problems"] = [
        {"section": section, "message": "NVIDIA-SMI has failed because it couldn't communicate"}
        for section in ("gpus", "gpu_details", "compute_apps")
    ]
    parsed["gpus"] = []
    return f.make_snapshot(host, status="partial", parsed=parsed)


def form(client, user, deployment, kind):
    client.force_login(user)
    response = client.get(reverse("deployments:change_form", args=[deployment.pk, kind]))
    assert response.status_code == 200
    return response.content.decode()


def asked(body):
    """The acknowledgements the page asks for, by field name."""
    return set(re.findall(r'name="(acknowledge_\w+)"', body))


def fields(acks):
    return [a.field for a in acks]


def test_an_idle_host_with_a_clean_engine_and_an_ok_snapshot_is_asked_nothing(
    client, operator, deployment, catalog
):
    f.make_integrity_snapshot(deployment.host)  # clean, and the form's snapshot
    for kind in ("restart", "stop", "redeploy", "model_swap", "rollback", "engine_repair"):
        assert asked(form(client, operator, deployment, kind)) == set(), kind


def test_requests_in_flight_are_asked_about_with_how_many(client, operator, deployment):
    snapshot = f.make_snapshot(deployment.host, parsed=f.parsed_state(running=3))
    acks = change_acknowledgements(deployment=deployment, kind="restart", snapshot=snapshot)
    assert fields(acks) == ["acknowledge_busy"] and acks[0].required
    assert acks[0].facts == [
        f"snapshot #{snapshot.pk}: 3 requests in flight on {deployment.unit}; acting now drops them"
    ]
    body = form(client, operator, deployment, "restart")
    assert asked(body) == {"acknowledge_busy"}
    assert f"snapshot #{snapshot.pk}: 3 requests in flight" in body
    # a start drops nothing: nothing to ask
    assert change_acknowledgements(deployment=deployment, kind="start", snapshot=snapshot) == []


def test_draining_the_acknowledgement_is_optional_and_says_what_it_is_for(deployment):
    idle = f.make_snapshot(deployment.host)
    acks = change_acknowledgements(
        deployment=deployment, kind="restart", snapshot=idle, drains=True
    )
    assert fields(acks) == ["acknowledge_busy"] and not acks[0].required
    assert "drain's deadline" in acks[0].label and "none in flight now" in acks[0].facts[0]


def test_a_patched_engine_is_asked_about_for_a_new_revision_only(
    client, operator, deployment, catalog
):
    f.make_integrity_snapshot(deployment.host, modified=(PATCHED,))
    # Asked before a model is picked: the engine is patched whatever it would serve.
    assert asked(form(client, operator, deployment, "model_swap")) == {"acknowledge_integrity"}
    client.force_login(operator)
    url = reverse("deployments:change_preflight", args=[deployment.pk, "model_swap"])
    picked = client.post(url, {"model": catalog["INT4"].pk}, headers={"HX-Request": "true"})
    body = picked.content.decode()
    # The answer carries the acknowledgements too, swapped in beside the pre-flight.
    acks = body[body.index('<div id="acknowledgements" hx-swap-oob="true">') :]
    assert asked(acks) == {"acknowledge_integrity"} and PATCHED in acks
    assert asked(form(client, operator, deployment, "redeploy")) == {"acknowledge_integrity"}
    assert asked(form(client, operator, deployment, "restart")) == set()  # writes no revision


def test_a_partial_snapshot_is_asked_about_by_a_stop_or_restart_with_what_is_unknown(
    client, operator, deployment
):
    snapshot = partial_snapshot(deployment.host)
    acks = change_acknowledgements(deployment=deployment, kind="restart", snapshot=snapshot)
    assert fields(acks) == ["acknowledge_unknown"]
    assert acks[0].facts == [
        f"snapshot #{snapshot.pk} is partial; unknown: gpus, gpu_details, compute_apps: "
        "NVIDIA-SMI has failed because it couldn't communicate"
    ]
    assert asked(form(client, operator, deployment, "restart")) == {"acknowledge_unknown"}
    # a swap may not rest on a partial snapshot at all: nothing to acknowledge, it is refused
    assert (
        change_acknowledgements(deployment=deployment, kind="model_swap", snapshot=snapshot) == []
    )
    assert "acknowledge_unknown" not in asked(form(client, operator, deployment, "model_swap"))


def test_what_the_form_asks_is_what_the_request_refuses_without(operator, deployment, catalog):
    """The page's rule and the request's are one: each required acknowledgement is exactly one
    the request refuses without, and nothing else is."""
    hook = DrainHook.objects.create(name="lb", drain_command="lb out", undrain_command="lb in")
    host = deployment.host
    cases = [
        ("restart", lambda: f.make_snapshot(host, parsed=f.parsed_state(running=2)), {}),
        ("restart", lambda: f.make_snapshot(host, parsed=f.parsed_state(running=2)),
         {"drain_hook": hook}),
        ("redeploy", lambda: f.make_integrity_snapshot(host, modified=(PATCHED,)), {}),
        ("restart", lambda: partial_snapshot(host), {}),
        ("restart", lambda: f.make_snapshot(host), {}),
    ]  # fmt: skip
    for kind, make, extra in cases:
        snapshot = make()
        acks = change_acknowledgements(
            deployment=deployment, kind=kind, snapshot=snapshot, drains="drain_hook" in extra
        )
        required = {a.field for a in acks if a.required}
        for name in ACKNOWLEDGEMENTS:
            given = {n: n != name for n in ACKNOWLEDGEMENTS}  # all but this one
            try:
                change = services.change_request_create(
                    user=operator, deployment=deployment, kind=kind, snapshot=snapshot,
                    reason="try", **given, **extra,
                )  # fmt: skip
            except services.ChangeRefused as refused:
                assert name in required, (kind, name, refused.message)
                assert "cknowledge" in refused.message
            else:
                assert name not in required, (kind, name)
                services.change_request_cancel(change=change, user=operator)
