"""The change form's pre-flight follows every field that changes it (model, parallelism,
context length, engine arguments, environment, acknowledgements), through the same service
checks the request runs: it cannot say "fits" beside a change the request refuses."""

from __future__ import annotations

import pytest
from django.urls import reverse

from deployments.models import ChangeRequest
from tests import factories as f

pytestmark = pytest.mark.django_db


def preflight(client, user, deployment, kind, **fields):
    client.force_login(user)
    url = reverse("deployments:change_preflight", args=[deployment.pk, kind])
    response = client.post(url, fields, headers={"HX-Request": "true"})
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="preflight"')  # the fragment only
    return body


def test_tensor_parallel_3_does_not_fit_and_says_so(client, operator, deployment, catalog):
    snapshot = f.make_snapshot(deployment.host)
    as_deployed = preflight(client, operator, deployment, "redeploy", snapshot_id=snapshot.pk)
    assert "Memory: fits (tensor-parallel 8)" in as_deployed
    assert "no blocking problem" in as_deployed

    body = preflight(
        client, operator, deployment, "redeploy", snapshot_id=snapshot.pk,
        tensor_parallel_size=3, reason="",
    )  # fmt: skip
    assert "fits (tensor-parallel 8)" not in body
    assert "✗ Memory: does not fit (tensor-parallel 3)" in body
    assert "no blocking problem" not in body
    assert "3 used at the parallelism that will run" in body

    # The request refuses it with the very words the pre-flight showed.
    shown = body.split('id="preflight-fit">✗ Memory: ', 1)[1].split("</p>", 1)[0]
    refused = client.post(
        reverse("deployments:change_form", args=[deployment.pk, "redeploy"]),
        {"snapshot_id": snapshot.pk, "reason": "fewer GPUs", "tensor_parallel_size": 3},
    )
    assert refused.status_code == 409
    assert shown in refused.content.decode()
    assert "fits (tensor-parallel 8)" not in refused.content.decode()
    assert not ChangeRequest.objects.exists()
    swap = preflight(
        client, operator, deployment, "model_swap", snapshot_id=snapshot.pk,
        model=catalog["INT4"].pk, tensor_parallel_size=3,
    )  # fmt: skip
    assert "does not fit (tensor-parallel 3)" in swap and "no blocking problem" not in swap


def test_each_field_the_request_weighs_moves_the_pre_flight(client, operator, deployment, catalog):
    snapshot = f.make_snapshot(deployment.host)

    def check(**fields):
        return preflight(
            client, operator, deployment, "redeploy", snapshot_id=snapshot.pk, **fields
        )

    hostile = check(extra_args="--x=$(reboot)")
    assert "✗ " in hostile and "no blocking problem" not in hostile
    reserved = check(extra_args="--tensor-parallel-size=2")
    assert "extra arguments" in reserved and "no blocking problem" not in reserved
    env = check(environment="not a name=1")
    assert "✗ " in env and "no blocking problem" not in env
    too_short = check(max_model_len=100)
    assert "256" in too_short and "no blocking problem" not in too_short
    # A change of the engine's flags or of the parallelism needs a second person.
    assert "Approval: not needed" in check()
    assert "needs a second person" in check(tensor_parallel_size=4)


def test_an_acknowledgement_clears_what_it_acknowledges(client, operator, deployment):
    snapshot = f.make_snapshot(deployment.host, parsed=f.parsed_state(running=3))
    busy = preflight(client, operator, deployment, "restart", snapshot_id=snapshot.pk)
    assert "Busy: 3 requests in flight" in busy and "no blocking problem" not in busy
    acknowledged = preflight(
        client, operator, deployment, "restart", snapshot_id=snapshot.pk, acknowledge_busy="on"
    )
    assert "Acknowledged: they will be dropped" in acknowledged
    assert "no blocking problem" in acknowledged


def test_the_form_asks_for_the_pre_flight_on_every_field(client, operator, deployment):
    f.make_snapshot(deployment.host)
    client.force_login(operator)
    url = reverse("deployments:change_form", args=[deployment.pk, "redeploy"])
    body = client.get(url).content.decode()
    panel = body[body.index('<div id="preflight-updates"') :].split(">", 1)[0]
    assert 'hx-trigger="change from:#change-form, keyup changed delay:400ms from:#change-form"' in (
        panel
    )
    assert 'hx-include="#change-form' in panel


def test_what_is_typed_never_reaches_a_url(client, operator, deployment):
    """Engine arguments and environment values are typed here: a GET would put them in access
    logs and browser history."""
    client.force_login(operator)
    url = reverse("deployments:change_preflight", args=[deployment.pk, "redeploy"])
    assert client.get(url, {"extra_args": "--max-num-seqs=8"}).status_code == 405
