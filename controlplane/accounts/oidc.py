"""The conversation with the team's OpenID Provider, through Authlib: the authorization code flow
with PKCE (S256), state and nonce kept in the session, the ID token's signature checked against
the provider's published keys (JWKS) and its issuer, audience, expiry and nonce against ours, and
the userinfo endpoint asked with the sign-in's access token.

Everything else (who the user is here, their groups, the audit trail) is
controlplane.accounts.services'. Nothing here logs or returns a code, a token or the client
secret in a message.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any

import requests
from authlib.integrations.base_client import MismatchingStateError, OAuthError
from authlib.integrations.django_client import DjangoOAuth2App, OAuth
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from joserfc.errors import ExpiredTokenError, JoseError

from controlplane import crypto

logger = logging.getLogger(__name__)

# The session key of the sign-in's access token (encrypted): the middleware asks userinfo with it.
ACCESS_TOKEN_SESSION_KEY = "oidc_access_token"
# The Authlib client's name; its state is kept in the session under `_state_idp_<state>`.
CLIENT_NAME = "idp"


class SignInRefused(Exception):
    """The provider's answer cannot sign anyone in. `reason` is a short code for the audit log,
    the message is for the person; neither carries a code or a token."""

    def __init__(self, reason: str, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.status = status


class TokenNotAccepted(Exception):
    """The provider no longer accepts the sign-in's access token: expired, revoked, or its user
    is gone. The sign-in is over."""


class ProviderUnavailable(Exception):
    """The provider did not answer, or not in a way that can be read."""


@dataclass(frozen=True)
class ProviderConfig:
    issuer: str
    client_id: str
    client_secret: str
    endpoints: tuple[tuple[str, str], ...]  # all four, or none (discovery)
    scopes: str
    timeout: float


@dataclass(frozen=True)
class SignedIn:
    """What a verified ID token (and userinfo, when the token has no groups) said."""

    issuer: str
    subject: str
    claims: dict[str, Any]
    access_token: str


def access_token_keep(session: Any, access_token: str) -> None:
    """Keep the sign-in's access token in its session, encrypted as other secrets at rest are
    (FIELD_ENCRYPTION_KEY): the session table is not where a bearer token should be readable."""
    session[ACCESS_TOKEN_SESSION_KEY] = crypto.encrypt(access_token)


def access_token_of(session: Any) -> str | None:
    """The sign-in's access token, or None (none kept, or kept under another key)."""
    stored = session.get(ACCESS_TOKEN_SESSION_KEY)
    if not stored:
        return None
    try:
        return crypto.decrypt(stored)
    except crypto.SecretUnavailable:
        return None


def configured() -> bool:
    return bool(settings.OIDC_ISSUER and settings.OIDC_CLIENT_ID)


def _config() -> ProviderConfig:
    return ProviderConfig(
        issuer=settings.OIDC_ISSUER,
        client_id=settings.OIDC_CLIENT_ID,
        client_secret=settings.OIDC_CLIENT_SECRET,
        endpoints=tuple(sorted((k, v) for k, v in settings.OIDC_ENDPOINTS.items() if v)),
        scopes=" ".join(settings.OIDC_SCOPES),
        timeout=settings.OIDC_TIMEOUT_SECONDS,
    )


@functools.lru_cache(maxsize=4)
def _client(config: ProviderConfig) -> DjangoOAuth2App:
    """One Authlib client per configuration, so that the discovery document and the keys are
    fetched once (and the keys again when a token names a key id the set does not have)."""
    endpoints = dict(config.endpoints)
    registry = OAuth()
    registry.register(
        name=CLIENT_NAME,
        client_id=config.client_id,
        client_secret=config.client_secret or None,
        server_metadata_url=(
            None if endpoints else f"{config.issuer}/.well-known/openid-configuration"
        ),
        authorize_url=endpoints.get("authorization_endpoint"),
        access_token_url=endpoints.get("token_endpoint"),
        client_kwargs={
            "scope": config.scopes,
            "code_challenge_method": "S256",
            "default_timeout": config.timeout,
        },
        # Without discovery these are the metadata Authlib reads.
        **(
            {
                "issuer": config.issuer,
                "userinfo_endpoint": endpoints["userinfo_endpoint"],
                "jwks_uri": endpoints["jwks_uri"],
            }
            if endpoints
            else {}
        ),
    )
    client: DjangoOAuth2App = registry.create_client(CLIENT_NAME)
    return client


def _metadata(client: DjangoOAuth2App, config: ProviderConfig) -> dict[str, Any]:
    try:
        metadata: dict[str, Any] = client.load_server_metadata()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderUnavailable(
            f"The identity provider at {config.issuer} did not answer ({type(exc).__name__})."
        ) from None
    # OpenID Connect Discovery: the document must name the issuer it was asked about, or its
    # endpoints are not that issuer's.
    if metadata.get("issuer", config.issuer) != config.issuer:
        raise ProviderUnavailable(
            f"The identity provider's discovery document names the issuer "
            f"{metadata.get('issuer')!r}, not OIDC_ISSUER ({config.issuer})."
        )
    return metadata


def authorization_redirect(request: HttpRequest, *, redirect_uri: str) -> HttpResponse:
    """Send the browser to the provider, with a fresh state, nonce and PKCE verifier kept in
    this session."""
    config = _config()
    client = _client(config)
    _metadata(client, config)
    response: HttpResponse = client.authorize_redirect(request, redirect_uri)
    return response


def _claims_options(config: ProviderConfig) -> dict[str, Any]:
    # Authlib checks the issuer it discovered and leaves the audience to the caller: both are
    # required here, the audience being this client (a token minted for another application
    # of the same provider must not sign anyone in here).
    return {
        "iss": {"essential": True, "value": config.issuer},
        "aud": {"essential": True, "values": [config.client_id]},
        "sub": {"essential": True},
    }


def callback_verify(request: HttpRequest) -> SignedIn:
    """The provider's redirect back: the state must be this session's (and is used up), the code
    is exchanged with the PKCE verifier, and the ID token verified."""
    config = _config()
    client = _client(config)
    _metadata(client, config)
    returned_issuer = request.GET.get("iss")
    if returned_issuer is not None and returned_issuer != config.issuer:
        # RFC 9207: an answer from another provider, mixed up with ours.
        raise SignInRefused("issuer_mismatch", "The answer came from another identity provider.")
    try:
        token = client.authorize_access_token(request, claims_options=_claims_options(config))
    except MismatchingStateError:
        raise SignInRefused(
            "state_mismatch",
            "This sign-in was already completed, has expired, or was started in another "
            "browser. Sign in again.",
        ) from None
    except OAuthError as exc:
        raise SignInRefused(
            f"provider_error:{str(exc.error)[:60]}",
            f"The identity provider refused the sign-in ({str(exc.error)[:60]}). Sign in again.",
        ) from None
    except ExpiredTokenError:
        raise SignInRefused(
            "id_token_expired", "The identity provider's ID token had expired."
        ) from None
    except JoseError as exc:
        raise SignInRefused(
            f"id_token_invalid:{exc.error}",
            "The identity provider's ID token could not be verified, so nobody was signed in.",
        ) from None
    except (requests.RequestException, ValueError, KeyError, TypeError) as exc:
        logger.warning("the identity provider's token answer was unusable: %s", type(exc).__name__)
        raise SignInRefused(
            "provider_unreadable",
            "The identity provider's answer to the sign-in could not be read. Try again.",
            status=502,
        ) from None
    claims = token.get("userinfo")
    access_token = token.get("access_token")
    if not claims or not isinstance(access_token, str):
        raise SignInRefused("no_id_token", "The identity provider sent no ID token.")
    return SignedIn(
        issuer=config.issuer,
        subject=str(claims["sub"]),
        claims=dict(claims),
        access_token=access_token,
    )


def userinfo(*, access_token: str, subject: str) -> dict[str, Any]:
    """What the provider says of the token's user now. Raises TokenNotAccepted when the token is
    refused (or names someone else), ProviderUnavailable when there is no usable answer."""
    config = _config()
    client = _client(config)
    metadata = _metadata(client, config)
    try:
        response = client.get(
            metadata["userinfo_endpoint"],
            token={"access_token": access_token, "token_type": "Bearer"},
            timeout=config.timeout,
        )
    except (requests.RequestException, KeyError) as exc:
        raise ProviderUnavailable(
            f"The identity provider's userinfo endpoint did not answer ({type(exc).__name__})."
        ) from None
    if response.status_code in (400, 401, 403):
        raise TokenNotAccepted(
            f"The identity provider no longer accepts this sign-in (HTTP {response.status_code})."
        )
    if response.status_code != 200:
        raise ProviderUnavailable(
            f"The identity provider's userinfo endpoint answered HTTP {response.status_code}."
        )
    try:
        answer = response.json()
    except ValueError:
        raise ProviderUnavailable("The identity provider's userinfo answer is not JSON.") from None
    if not isinstance(answer, dict):
        raise ProviderUnavailable("The identity provider's userinfo answer is not an object.")
    # OpenID Connect Core 5.3.2: a userinfo answer about another subject must not be used.
    if answer.get("sub") != subject:
        raise TokenNotAccepted("The identity provider's userinfo answer is about someone else.")
    return answer
