"""Signing in through the test OpenID Provider with Django's test client: the client plays the
browser at the control plane, `IdP.browse_to_callback` plays it at the provider."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.test import Client
from django.urls import reverse

from tests.oidc.provider import IdP

PASSWORD = "provider-password-7f3a"


def authorize_url(client: Client, *, next_url: str | None = None) -> str:
    """Leg one: the control plane sends the browser to the provider."""
    query = {"next": next_url} if next_url else {}
    response = client.get(reverse("accounts:oidc_start"), query)
    assert response.status_code == 302, response.content
    return response["Location"]


def callback_path(url: str) -> str:
    """The control plane's callback URL as the test client requests it."""
    parts = urlsplit(url)
    assert parts.netloc == "testserver", url
    return f"{parts.path}?{parts.query}"


def sign_in(client: Client, idp: IdP, login: str, *, password: str = PASSWORD, **kw: Any) -> Any:
    """The whole flow: returns the control plane's answer to the provider's redirect back."""
    callback = idp.browse_to_callback(authorize_url(client, **kw), login=login, password=password)
    return client.get(callback_path(callback))


def query_of(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
