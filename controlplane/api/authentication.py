"""`Authorization: Bearer <token>` (or `Token <token>`) for the JSON API."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from controlplane.accounts import services as account_services

from . import services

KEYWORDS = (b"bearer", b"token")


class APITokenAuthentication(BaseAuthentication):
    """Personal API tokens. Requests without a token fall through to the next authenticator
    (the session, for the browsable API); a token that is unknown, revoked or expired is a 401,
    never a silent fallback."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() not in KEYWORDS:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed(
                "Invalid Authorization header: use `Bearer <token>`."
            )
        try:
            raw = parts[1].decode("ascii")
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed("Invalid token.") from exc
        token = services.token_authenticate(raw=raw)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked token.")
        # A token of the identity provider's user acts on the groups last confirmed, while they
        # are recent enough (accounts.services.api_token_refusal).
        refusal = account_services.api_token_refusal(user=token.user, now=timezone.now())
        if refusal is not None:
            raise exceptions.AuthenticationFailed(refusal)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        # Makes DRF answer 401 (not 403) when no credentials were sent.
        return 'Bearer realm="api"'


class APITokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "controlplane.api.authentication.APITokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal API token from the API tokens page: "
            "`Authorization: Bearer cpt_…` (`Token cpt_…` is accepted too).",
        }
