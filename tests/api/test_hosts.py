"""GET /api/v1/hosts/ and /hosts/{name}/: every persona, and no secret in sight."""

from __future__ import annotations

import pytest

from hosts.models import Host
from tests import factories as f

pytestmark = pytest.mark.django_db

LIST = "/api/v1/hosts/"


def test_it_needs_credentials(api_for):
    response = api_for(None).get(LIST)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert response.json()["code"] == "not_authenticated"


def test_it_needs_a_role(api_for, outsider):
    f.make_host("gpu-01")
    for url in (LIST, "/api/v1/hosts/gpu-01/"):
        response = api_for(outsider).get(url)
        assert response.status_code == 403
        assert response.json() == {
            "detail": "This needs the viewer role.",
            "code": "permission_denied",
        }


def test_it_lists_hosts_by_name_with_their_latest_snapshot(api_for, viewer):
    second, first = f.make_host("gpu-02"), f.make_host("gpu-01")
    f.make_snapshot(first, age=60)
    newest = f.make_snapshot(first, age=5)
    response = api_for(viewer).get(LIST)
    assert response.status_code == 200
    body = response.json()
    assert [h["name"] for h in body["results"]] == ["gpu-01", "gpu-02"]
    latest = body["results"][0]["latest_snapshot"]
    assert latest["id"] == newest.pk
    assert latest["status"] == "ok"
    assert latest["stale"] is False
    assert 4 < latest["age_seconds"] < 10
    assert body["results"][1]["latest_snapshot"] is None
    assert second.name == "gpu-02"


def test_it_pages_by_cursor(api_for, viewer):
    for i in range(5):
        f.make_host(f"gpu-{i:02d}")
    client = api_for(viewer)
    names, url = [], f"{LIST}?page_size=2"
    while url:
        body = client.get(url).json()
        names += [h["name"] for h in body["results"]]
        url = body["next"]
    assert names == [f"gpu-{i:02d}" for i in range(5)]


@pytest.mark.parametrize("cursor", ["not-base64!", "cD0lMDA=", "cj14", "%00"])
def test_a_bad_cursor_is_a_400(api_for, viewer, cursor):
    f.make_host("gpu-01")
    response = api_for(viewer).get(LIST, {"cursor": cursor})
    assert response.status_code == 400
    assert "cursor" in response.json()


def test_one_host_shows_key_fingerprints_and_the_credential_name_only(api_for, viewer):
    host = f.make_host("gpu-01")
    response = api_for(viewer).get("/api/v1/hosts/gpu-01/")
    assert response.status_code == 200
    body = response.json()
    assert body["credential"] == "gpu-01-key"
    assert body["host_key_status"] == "pinned"
    assert body["host_key_fingerprint"].startswith("SHA256:")
    assert body["latest_snapshot"] is None
    text = response.content.decode()
    assert "PRIVATE KEY" not in text
    assert host.credential.private_key_encrypted not in text
    assert f.HOST_KEY.split()[1] not in text  # the fingerprint, not the key itself
    for line in f.CLIENT_KEY.strip().splitlines()[1:-1]:
        assert line not in text


@pytest.mark.parametrize("name", ["gpu-09", "GPU-01", "gpu_01", "a" * 70, "gpu%00"])
def test_an_unknown_or_impossible_name_is_a_404(api_for, viewer, name):
    f.make_host("gpu-01")
    response = api_for(viewer).get(f"/api/v1/hosts/{name}/")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_every_role_reads(api_for, viewer, operator, approver, admin_user):
    f.make_host("gpu-01")
    for user in (viewer, operator, approver, admin_user):
        assert api_for(user).get(LIST).status_code == 200
    assert Host.objects.count() == 1
