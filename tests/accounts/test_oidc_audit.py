"""The audit trail names the identity provider's issuer and subject beside the user name, on
every event a provider's user acts in (a sign-in, a change request, an approval); the approval
rules hold for them as for anyone; and no secret of the flow (the client secret, the code, the
PKCE verifier, the access and ID tokens) reaches a page, a log line or the audit log."""

from __future__ import annotations

import json
import logging

import pytest
from django.urls import reverse

from controlplane.accounts.models import GroupRoleMapping, Identity
from controlplane.accounts.oidc import ACCESS_TOKEN_SESSION_KEY, access_token_of
from controlplane.accounts.roles import APPROVER, OPERATOR
from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from deployments.models import ChangeRequest
from tests import factories as f
from tests.oidc.flows import PASSWORD, authorize_url, callback_path, query_of, sign_in

pytestmark = pytest.mark.django_db

CHANGES = "/api/v1/changes/"


def identity_of(event: AuditEvent) -> dict[str, str] | None:
    return event.data.get("actor_identity")


@pytest.fixture
def swap_target():
    catalog = f.make_catalog()
    host = f.make_host("gpu-01", port=1)
    deployment = f.make_deployment(host, catalog["NVFP4"])
    return {"deployment": deployment, "snapshot": f.make_snapshot(host), "model": catalog["INT4"]}


def request_swap(client, target):
    body = {
        "deployment_id": target["deployment"].pk,
        "kind": "model_swap",
        "snapshot_id": target["snapshot"].pk,
        "model_id": target["model"].pk,
        "reason": "INT4 serves more tokens per second",
    }
    return client.post(CHANGES, body, content_type="application/json")


def test_sign_in_and_change_request_events_name_the_issuer_and_subject(
    client, sso, swap_target, django_user_model
):
    GroupRoleMapping.objects.create(idp_group="gpu-ops", role=OPERATOR)
    sso.account("u-4711", password=PASSWORD, preferred_username="olga", groups=["gpu-ops"])
    sign_in(client, sso, "u-4711")
    who = {"issuer": sso.issuer, "subject": "u-4711"}

    login = AuditEvent.objects.get(action=AuditAction.AUTH_LOGIN)
    assert login.actor == "sso:olga" and identity_of(login) == who
    assert login.data["method"] == "identity_provider"
    linked = AuditEvent.objects.get(action=AuditAction.IDENTITY_LINKED)
    assert identity_of(linked) == who

    response = request_swap(client, swap_target)
    assert response.status_code == 201, response.content
    requested = AuditEvent.objects.get(action=AuditAction.CHANGE_REQUESTED)
    assert requested.actor == "sso:olga" and identity_of(requested) == who
    # the history page and the JSON export show it too
    page = client.get(reverse("audit:event", args=[requested.seq])).content.decode()
    assert "u-4711" in page
    export = b"".join(client.get(reverse("audit:export_jsonl")).streaming_content).decode()
    assert '"actor_identity":{"issuer":"' + sso.issuer + '","subject":"u-4711"}' in export


def test_a_local_accounts_events_carry_no_identity(client, operator):
    client.force_login(operator)
    client.post(reverse("logout"))
    logout = AuditEvent.objects.get(action=AuditAction.AUTH_LOGOUT)
    assert logout.actor == operator.username and identity_of(logout) is None


def test_approval_rules_hold_for_the_providers_users(client, sso, swap_target):
    """Not yourself, and only with the approver role: the groups give roles, nothing more."""
    GroupRoleMapping.objects.create(idp_group="gpu-ops", role=OPERATOR)
    GroupRoleMapping.objects.create(idp_group="approvers", role=APPROVER)
    sso.account("pia", password=PASSWORD, groups=["gpu-ops", "approvers"])
    sso.account("quinn", password=PASSWORD, groups=["approvers"])
    sign_in(client, sso, "pia")
    change = ChangeRequest.objects.get(pk=request_swap(client, swap_target).json()["id"])
    approve = f"{CHANGES}{change.pk}/approve/"
    body = {"snapshot_id": swap_target["snapshot"].pk, "reason": "looks right"}
    mine = client.post(approve, body, content_type="application/json")
    assert mine.status_code == 403  # pia requested it
    client.logout()
    sign_in(client, sso, "quinn")
    approved = client.post(approve, body, content_type="application/json")
    assert approved.status_code == 200, approved.content
    event = AuditEvent.objects.get(action=AuditAction.CHANGE_APPROVED)
    assert identity_of(event) == {"issuer": sso.issuer, "subject": "quinn"}


def test_no_secret_of_the_flow_reaches_pages_logs_or_the_audit_log(client, sso, caplog):
    caplog.set_level(logging.DEBUG)
    GroupRoleMapping.objects.create(idp_group="gpu-ops", role=OPERATOR)
    sso.account("rex", password=PASSWORD, groups=["gpu-ops"])
    pages: list[str] = []

    def visit(response):
        body = b"".join(response.streaming_content) if response.streaming else response.content
        pages.append(body.decode(errors="replace"))
        return response

    visit(client.get(reverse("login")))
    url = authorize_url(client)
    session = client.session
    verifier = next(
        v["data"]["code_verifier"] for k, v in session.items() if k.startswith("_state_")
    )
    callback = sso.browse_to_callback(url, login="rex", password=PASSWORD)
    code = query_of(callback)["code"]
    visit(client.get(callback_path(callback)))
    issued = sso.last_token_response()
    access_token = access_token_of(client.session)
    assert access_token == issued["access_token"]
    assert access_token not in client.session[ACCESS_TOKEN_SESSION_KEY]  # encrypted at rest
    secrets = {
        "client secret": sso.client_secret,
        "code": code,
        "PKCE verifier": verifier,
        "access token": access_token,
        "ID token": issued["id_token"],
        # a JWT's signature alone is as telling as the whole
        "ID token signature": issued["id_token"].rsplit(".", 1)[1],
    }
    # pages a signed-in user reads, an acting request (a re-check), a refused sign-in, an
    # ended one, and the audit log's pages and exports
    visit(client.get(reverse("hosts:dashboard")))
    visit(client.post(reverse("api:tokens"), {"name": "ci"}))
    for event in AuditEvent.objects.all():
        visit(client.get(reverse("audit:event", args=[event.seq])))
    visit(client.get(reverse("audit:history")))
    visit(client.get(reverse("audit:export_jsonl")))
    visit(client.get(reverse("audit:export_csv")))
    sso.move_clock(7200)
    visit(client.post(reverse("api:tokens"), {"name": "ci2"}, follow=True))
    sso.move_clock(0)
    sso.tamper_next_id_token("rogue_key")
    visit(sign_in(client, sso, "rex"))
    # a replay of the used answer, with its code in the URL
    visit(client.get(callback_path(callback)))

    audit = [json.dumps(event.data) + event.target_label for event in AuditEvent.objects.all()]
    logged = caplog.text + "".join(str(r.args) for r in caplog.records)
    assert Identity.objects.filter(subject="rex").exists() and len(audit) > 5
    for name, secret in secrets.items():
        assert len(secret) >= 20, name
        assert not any(secret in page for page in pages), f"the {name} is in a page"
        assert secret not in logged, f"the {name} is in the log"
        assert not any(secret in entry for entry in audit), f"the {name} is in the audit log"
