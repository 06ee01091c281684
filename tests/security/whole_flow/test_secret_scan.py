"""No secret leaves where it is kept. After a whole flow (hosts probed over SSH, an API token used,
a model swap requested, approved and run by a real worker, webhooks delivered, a failed sign-in),
every page an administrator can reach by following links, the API's answers, the audit log and
its exports, the webhook bodies and every log line are searched for each secret: SSH private
keys, API tokens, webhook secrets, passwords (right and mistyped), the token in the host's
environment file, and the server's own keys."""

from __future__ import annotations

import logging
import re
from collections import deque
from urllib.parse import urldefrag, urlparse

import pytest
from django.conf import settings
from django.test import Client
from rest_framework.test import APIClient

from controlplane.api import services as token_services
from controlplane.audit.models import AuditEvent
from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest, ModelArtifact
from hosts import services as host_services
from hosts.models import Host
from simulator import catalog
from tests.conftest import PASSWORD
from tests.fleet import register
from tests.notifications.conftest import SECRET as WEBHOOK_SECRET
from tests.notifications.conftest import wait_until_settled
from tests.waiting import wait_for_change

pytestmark = pytest.mark.integration

MISTYPED_PASSWORD = "Tr0ub4dor&3-mistyped"
HREF = re.compile(r'(?:href|hx-get)="([^"]+)"')
SKIP = ("/logout/", "/static/", "/favicon.ico", "/api/v1/docs/")
MAX_PAGES = 400


def secrets_of(fleet_host: Host, api_secret: str) -> dict[str, str]:
    key = Host.objects.select_related("credential").get(pk=fleet_host.pk).credential.private_key()
    found = {
        "api token": api_secret,
        "webhook secret": WEBHOOK_SECRET,
        "password": PASSWORD,
        "mistyped password": MISTYPED_PASSWORD,
        "HF token in the environment file": catalog.FAKE_HF_TOKEN,
        "SECRET_KEY": settings.SECRET_KEY,
        "FIELD_ENCRYPTION_KEY": settings.FIELD_ENCRYPTION_KEY,
        "AUDIT_SIGNING_KEY": settings.AUDIT_SIGNING_KEY,
    }
    # Every long line of the private key's body, so a partial leak shows too.
    body = [line for line in key.splitlines() if len(line) >= 40 and "PRIVATE KEY" not in line]
    assert body, "the test could not read the private key"
    found.update({f"SSH private key line {i}": line for i, line in enumerate(body)})
    return found


def body_of(response) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode(errors="replace")
    return response.content.decode(errors="replace")


def crawl(client: Client, start: str = "/") -> dict[str, str]:
    """Every page reachable by links from `start`, as an administrator would click through."""
    seen: dict[str, str] = {}
    queue = deque([start])
    while queue and len(seen) < MAX_PAGES:
        url = queue.popleft()
        if url in seen:
            continue
        response = client.get(url)
        assert response.status_code < 500, (url, response.status_code)
        text = body_of(response)
        seen[url] = text
        if "html" not in response.get("Content-Type", ""):
            continue
        for link in HREF.findall(text):
            link = urldefrag(link.replace("&amp;", "&"))[0]
            parsed = urlparse(link)
            if parsed.netloc or not parsed.path.startswith("/") or link.startswith(SKIP):
                continue
            # One page of each list is enough; filters multiply pages without new content.
            if "page=" in parsed.query or "before=" in parsed.query:
                continue
            queue.append(link)
    return seen


def test_no_secret_appears_anywhere_after_a_whole_flow(
    make_fleet, webhook_worker, receiver, make_endpoint, operator, approver, admin_user, caplog
):
    caplog.set_level(logging.DEBUG)
    fleet = register(make_fleet(1, unit_styles={"gpu-01": "envfile"}))
    host = fleet.host("gpu-01")
    make_endpoint(receiver.url)
    api_secret = token_services.token_create(user=operator, name="ci").secret
    approver_secret = token_services.token_create(user=approver, name="ci").secret

    # A mistyped password at the sign-in form.
    Client().post("/login/", {"username": operator.username, "password": MISTYPED_PASSWORD})

    # The swap, through the API with tokens, run by the real worker.
    snapshot = host_services.host_probe(host=Host.objects.get(pk=host.pk), trigger="manual")
    assert snapshot.status == "ok", snapshot.error
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {api_secret}")
    int4 = ModelArtifact.objects.get(path__endswith="K2.5-INT4")
    response = api.post("/api/v1/changes/", {
        "deployment_id": fleet.deployments[0].pk, "kind": "model_swap", "snapshot_id": snapshot.pk,
        "model_id": int4.pk, "reason": "INT4 serves more tokens per second",
    }, format="json")  # fmt: skip
    assert response.status_code == 201, response.content
    change = ChangeRequest.objects.get(pk=response.json()["id"])
    fresh = host_services.host_probe(host=Host.objects.get(pk=host.pk), trigger="manual")
    approving = APIClient()
    approving.credentials(HTTP_AUTHORIZATION=f"Bearer {approver_secret}")
    response = approving.post(
        f"/api/v1/changes/{change.pk}/approve/", {"snapshot_id": fresh.pk, "reason": "fits"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 200, response.content
    change = wait_for_change(change)
    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    receiver.wait_for("job.finished")
    wait_until_settled()

    places: dict[str, str] = {}
    browser = Client()
    browser.force_login(admin_user)
    places.update({f"page {url}": text for url, text in crawl(browser).items()})
    assert any("/changes/" in p for p in places) and any("/admin/" in p for p in places)
    api_urls = (
        "/api/v1/hosts/", "/api/v1/hosts/gpu-01/snapshots/", f"/api/v1/snapshots/{fresh.pk}/",
        "/api/v1/changes/", f"/api/v1/changes/{change.pk}/", "/api/v1/audit/events/",
        "/api/v1/audit/export/", "/api/v1/deployments/",
    )  # fmt: skip
    for url in api_urls:
        response = api.get(url)
        assert response.status_code == 200, (url, response.status_code)
        places[f"api {url}"] = body_of(response)
    for url in ("/audit/export.csv", "/audit/export.jsonl"):
        places[f"export {url}"] = body_of(browser.get(url))
    places["audit events"] = "\n".join(
        f"{e.action} {e.actor} {e.target_label} {e.data}" for e in AuditEvent.objects.all()
    )
    places["webhook bodies"] = "\n".join(r.body.decode() for r in receiver.received())
    places["log records"] = "\n".join(r.getMessage() for r in caplog.records)
    places["worker log"] = webhook_worker.output()

    leaks = [
        (what, where)
        for what, secret in secrets_of(host, api_secret).items()
        for where, text in places.items()
        if secret and secret in text
    ]
    assert not leaks, leaks
    assert len(places) > 40, sorted(places)
