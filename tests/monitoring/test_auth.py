"""Who may read /metrics: Prometheus with the bearer token, or a person with a role."""

from __future__ import annotations

import pytest
from django.urls import reverse
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)

from deployments import services as change_services
from tests import factories as f

from .conftest import TOKEN

pytestmark = pytest.mark.django_db


def test_without_a_token_setting_an_anonymous_scrape_is_sent_to_sign_in(client, settings):
    settings.METRICS_TOKEN = ""
    response = client.get("/metrics")
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


def test_without_a_token_setting_a_bearer_token_is_refused(client, settings):
    settings.METRICS_TOKEN = ""
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer anything")
    assert response.status_code == 401


@pytest.mark.parametrize("token_set", [False, True])
def test_a_person_with_a_role_may_read_it(client, viewer, settings, token_set):
    settings.METRICS_TOKEN = TOKEN if token_set else ""
    client.force_login(viewer)
    response = client.get("/metrics")
    assert response.status_code == 200
    assert b"controlplane_approvals_waiting" in response.content


def test_a_person_without_a_role_may_not(client, outsider, settings):
    settings.METRICS_TOKEN = ""
    client.force_login(outsider)
    assert client.get("/metrics").status_code == 403


def test_with_a_token_setting_an_anonymous_scrape_gets_401(client, metrics_token):
    response = client.get("/metrics")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'


@pytest.mark.parametrize(
    "header",
    [
        f"Bearer {TOKEN}x",
        f"Bearer {TOKEN[:-1]}",
        "Bearer ",
        f"Basic {TOKEN}",
        TOKEN,
    ],
)
def test_a_wrong_token_is_refused(client, metrics_token, header):
    assert client.get("/metrics", HTTP_AUTHORIZATION=header).status_code == 401


def test_a_wrong_token_is_refused_even_with_a_session(client, viewer, metrics_token):
    client.force_login(viewer)
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer nope").status_code == 401


def test_the_right_token_gets_the_exposition(client, metrics_token):
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {metrics_token}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    assert "no-cache" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]


def test_openmetrics_is_served_when_asked_for(client, metrics_token):
    f.make_snapshot(f.make_host("gpu-01"))
    response = client.get(
        "/metrics",
        HTTP_AUTHORIZATION=f"Bearer {metrics_token}",
        HTTP_ACCEPT="application/openmetrics-text; version=1.0.0",
    )
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.endswith(b"# EOF\n")
    families = {m.name for m in openmetrics_families(response.content.decode())}
    assert "controlplane_model_served_info" in families


def test_only_get_and_head(client, metrics_token):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {metrics_token}"}
    assert client.head("/metrics", **auth).status_code == 200
    assert client.post("/metrics", **auth).status_code == 405


def test_the_change_annotations_are_behind_the_same_door(client, viewer, outsider, operator):
    """Grafana's change annotations are /metrics series: whoever may not scrape may not see
    which changes ran where."""
    catalog = f.make_catalog()
    deployment = f.make_deployment(f.make_host("gpu-01"), catalog["NVFP4"])
    change_services.change_request_create(
        user=operator, deployment=deployment, kind="restart",
        snapshot=f.make_snapshot(deployment.host), reason="patch",
    )  # fmt: skip
    client.force_login(outsider)
    assert client.get("/metrics").status_code == 403
    client.force_login(viewer)
    assert b"controlplane_change_event_timestamp_seconds{" in client.get("/metrics").content
