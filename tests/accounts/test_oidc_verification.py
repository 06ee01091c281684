"""What the control plane refuses from the provider's side of the flow: an ID token signed with
another key, altered, minted for another application or issuer, expired or unsigned; a state
used twice or from another browser; an error the provider answers with. Each is refused in
words on the sign-in page, audited, and signs nobody in."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from tests.oidc.flows import PASSWORD, authorize_url, callback_path, query_of, sign_in

pytestmark = pytest.mark.django_db

UNVERIFIED = b"ID token could not be verified, so nobody was signed in"


def refusals() -> list[str]:
    events = AuditEvent.objects.filter(action=AuditAction.AUTH_LOGIN_FAILED).order_by("seq")
    return [event.data["reason"] for event in events]


@pytest.mark.parametrize(
    ("mode", "reason", "words"),
    [
        # the provider's claims, signed with a key the provider never published (same key id)
        ("rogue_key", "id_token_invalid:bad_signature", UNVERIFIED),
        # the provider's signature over claims someone changed (a group added)
        ("tampered_payload", "id_token_invalid:bad_signature", UNVERIFIED),
        # signed by the provider, for another application (azp names ours: only aud refuses)
        ("wrong_audience", "id_token_invalid:invalid_claim", UNVERIFIED),
        ("wrong_issuer", "id_token_invalid:invalid_claim", UNVERIFIED),
        ("expired", "id_token_expired", b"ID token had expired"),
        ("alg_none", "id_token_invalid:", UNVERIFIED),
    ],
)
def test_an_id_token_that_does_not_verify_signs_nobody_in(client, sso, mode, reason, words):
    sso.account("mallory", password=PASSWORD, groups=["gpu-ops"])
    sso.tamper_next_id_token(mode)
    response = sign_in(client, sso, "mallory")
    assert response.status_code == 400
    assert words in response.content
    assert b"Sign in with Test IdP" in response.content  # and the way to try again
    assert "_auth_user_id" not in client.session
    assert not User.objects.filter(identity__subject="mallory").exists()
    assert len(refusals()) == 1 and refusals()[0].startswith(reason)


def test_the_same_flow_without_tampering_signs_in(client, sso):
    """The cases above fail for what was tampered with, not for the account or the flow."""
    sso.account("mallory", password=PASSWORD, groups=["gpu-ops"])
    assert sign_in(client, sso, "mallory").status_code == 302


def test_a_replayed_state_is_refused(client, sso):
    sso.account("ivan", password=PASSWORD)
    callback = sso.browse_to_callback(authorize_url(client), login="ivan", password=PASSWORD)
    assert client.get(callback_path(callback)).status_code == 302
    client.logout()
    # the same answer again, in the browser that used it, and in another one (login CSRF)
    again = client.get(callback_path(callback))
    assert again.status_code == 400 and b"already completed, has expired" in again.content
    elsewhere = Client()
    assert elsewhere.get(callback_path(callback)).status_code == 400
    assert "_auth_user_id" not in client.session and "_auth_user_id" not in elsewhere.session
    assert refusals() == ["state_mismatch", "state_mismatch"]


def test_a_state_from_another_browsers_flow_is_refused(client, sso):
    sso.account("judy", password=PASSWORD)
    attacker = Client()
    callback = sso.browse_to_callback(authorize_url(attacker), login="judy", password=PASSWORD)
    authorize_url(client)  # the victim started a sign-in of their own
    response = client.get(callback_path(callback))
    assert response.status_code == 400 and "_auth_user_id" not in client.session


def test_an_answer_without_state_or_code_is_refused_not_a_server_error(client, sso):
    for query in ("", "?code=abc", "?state=abc", "?state=abc&code=abc&iss=x", "?error=x"):
        response = client.get(f"/oidc/callback/{query}")
        assert response.status_code == 400, query
    assert "_auth_user_id" not in client.session


def test_the_providers_refusal_is_shown_in_words(client, sso):
    state = query_of(authorize_url(client))["state"]
    response = client.get(
        "/oidc/callback/",
        {"error": "access_denied", "error_description": "User cancelled", "state": state},
    )
    assert response.status_code == 400
    assert b"The identity provider refused the sign-in (access_denied)" in response.content
    assert refusals() == ["provider_error:access_denied"]


def test_an_answer_naming_another_issuer_is_refused(client, sso):
    sso.account("kim", password=PASSWORD)
    callback = sso.browse_to_callback(authorize_url(client), login="kim", password=PASSWORD)
    assert query_of(callback)["iss"] == sso.issuer  # RFC 9207: the provider names itself
    mixed_up = callback_path(callback).replace("iss=", "iss=x")
    response = client.get(mixed_up)
    assert response.status_code == 400 and refusals() == ["issuer_mismatch"]


def test_a_code_redeemed_without_its_pkce_verifier_is_refused_by_the_provider(client, sso):
    """The verifier stays in the session that started the flow: a stolen code and state
    replayed into a session that has the state but not that verifier fail at the provider."""
    sso.account("leo", password=PASSWORD)
    callback = sso.browse_to_callback(authorize_url(client), login="leo", password=PASSWORD)
    session = client.session
    key = next(k for k, _ in session.items() if k.startswith("_state_idp_"))
    state_data = session[key]
    state_data["data"]["code_verifier"] = "x" * 64
    session[key] = state_data
    session.save()
    response = client.get(callback_path(callback))
    assert response.status_code == 400 and "_auth_user_id" not in client.session
    assert refusals() == ["provider_error:invalid_grant"]
