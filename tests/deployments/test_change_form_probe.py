"""A stale change form is no dead end: "Probe again" sits beside the snapshot's age (shown once it
turns red), queues a probe, follows it in the snapshot card's place, and swaps the form onto the
new snapshot, which asks for the pre-flight on it; without htmx it goes back to the form."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from tests import factories as f

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


def urls(deployment, kind="restart"):
    args = [deployment.pk, kind]
    return (
        reverse("deployments:change_form", args=args),
        reverse("deployments:change_form_probe", args=args),
        reverse("deployments:change_form_snapshot", args=args),
    )


def test_probe_again_is_beside_the_age_of_a_fresh_snapshot_and_shows_once_it_is_stale(
    client, operator, deployment
):
    f.make_snapshot(deployment.host)
    form, probe, _ = urls(deployment)
    client.force_login(operator)
    body = client.get(form).content.decode()
    heading = body[body.index('<span class="snapshot-age">') :].split("</h3>", 1)[0]
    assert '<button type="submit" form="probe-again" class="probe-again"' in heading
    assert f'<form method="post" action="{probe}" id="probe-again"' in body
    # app.css shows it beside the red age only (app.js marks the age stale as it counts up)
    css = Path("controlplane/static/controlplane/app.css").read_text()
    assert ".snapshot-card .probe-again { display:none;" in css
    stale = ".snapshot-card:has(.snapshot-age .age.stale) .probe-again { display:inline-block; }"
    assert stale in css


def test_a_snapshot_already_refused_has_its_own_button_only(client, operator, deployment, settings):
    f.make_snapshot(deployment.host, age=400)
    client.force_login(operator)
    body = client.get(urls(deployment)[0]).content.decode()
    assert "Probe and review again" in body and 'form="probe-again"' not in body


def test_probe_again_follows_the_probe_and_swaps_the_form_onto_the_new_snapshot(
    client, operator, deployment, private_queue
):
    old = f.make_snapshot(deployment.host, age=250)
    _, probe, status = urls(deployment)
    client.force_login(operator)
    probing = client.post(probe, headers=HTMX)
    assert probing.status_code == 200
    card = probing.content.decode()
    assert 'id="decision-snapshot" data-probing' in card
    assert f'hx-get="{status}?after={old.pk}" hx-trigger="every 1s"' in card

    still = client.get(status, {"after": old.pk}, headers=HTMX)
    assert still.status_code == 200 and "data-probing" in still.content.decode()

    new = f.make_snapshot(deployment.host, age=1)
    done = client.get(status, {"after": old.pk}, headers=HTMX)
    assert done.status_code == 286  # htmx stops polling
    body = done.content.decode()
    assert f'<a href="/snapshots/{new.pk}/">#{new.pk}</a>' in body
    field = body[body.index('<input type="hidden" name="snapshot_id"') :].split(">", 1)[0]
    assert f'value="{new.pk}"' in field and 'hx-swap-oob="true"' in field
    assert 'hx-trigger="load"' in field and "/preflight/" in field  # the pre-flight follows


def test_without_htmx_it_goes_back_to_the_form(client, operator, deployment, private_queue):
    f.make_snapshot(deployment.host)
    form, probe, status = urls(deployment)
    client.force_login(operator)
    response = client.post(probe)
    assert response.status_code == 302 and response["Location"] == form
    assert client.get(status)["Location"] == form


def test_a_viewer_may_not(client, viewer, deployment):
    f.make_snapshot(deployment.host)
    _, probe, status = urls(deployment)
    client.force_login(viewer)
    assert client.post(probe, headers=HTMX).status_code == 403
    assert client.get(status, headers=HTMX).status_code == 403
