"""Signing in: the team's identity provider (OpenID Connect) and local accounts. The values are
read in settings.py; here they are checked, and a control plane that could not sign anyone in,
or would trust a provider over plain HTTP, is refused at start, naming the setting. The client
secret is never part of a message."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

LOCAL_LOGIN_CHOICES = ("on", "admins", "off")
# The endpoints a provider's discovery document names; set all of them to do without discovery.
ENDPOINT_SETTINGS = {
    "authorization_endpoint": "OIDC_AUTHORIZATION_ENDPOINT",
    "token_endpoint": "OIDC_TOKEN_ENDPOINT",
    "userinfo_endpoint": "OIDC_USERINFO_ENDPOINT",
    "jwks_uri": "OIDC_JWKS_URI",
}
# A claim's name: `groups`, `roles`, or a namespaced URL as Auth0 and others use.
_CLAIM_NAME = re.compile(r"\A[\w.:/-]{1,200}\Z")


def _on_this_machine(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _require_url(name: str, value: str) -> None:
    """HTTPS, or HTTP to a provider on this machine (the tests' provider, a developer's)."""
    parts = urlsplit(value)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ImproperlyConfigured(f"{name} must be an https:// URL, not {value!r}")
    if parts.scheme == "http" and not _on_this_machine(parts.hostname):
        raise ImproperlyConfigured(
            f"{name} must be an https:// URL: tokens and the client secret would cross the "
            f"network in clear ({value!r}); http:// is accepted only for a provider on this machine"
        )
    if parts.query or parts.fragment:
        raise ImproperlyConfigured(f"{name} must not carry a query or a fragment ({value!r})")


def scopes_parse(value: str) -> list[str]:
    """OIDC_SCOPES as OAuth writes them (space-separated), commas accepted too."""
    return [scope for scope in re.split(r"[\s,]+", value) if scope]


def check_sign_in(
    *,
    local_login: str,
    issuer: str,
    client_id: str,
    client_secret: str,
    endpoints: dict[str, str],
    scopes: list[str],
    groups_claim: str,
    recheck_seconds: int,
    token_groups_max_age_seconds: int,
    timeout_seconds: float,
) -> None:
    if local_login not in LOCAL_LOGIN_CHOICES:
        raise ImproperlyConfigured(
            f"LOCAL_LOGIN must be one of {', '.join(LOCAL_LOGIN_CHOICES)}, not {local_login!r}"
        )
    given = [ENDPOINT_SETTINGS[k] for k, v in endpoints.items() if v]
    if not issuer:
        stray = [
            n
            for n, v in (("OIDC_CLIENT_ID", client_id), ("OIDC_CLIENT_SECRET", client_secret))
            if v
        ]
        if stray or given:
            raise ImproperlyConfigured(
                f"{', '.join(stray + given)} set without OIDC_ISSUER: set the identity "
                "provider's issuer too, or none of these"
            )
        if local_login == "off":
            raise ImproperlyConfigured(
                "LOCAL_LOGIN=off needs an identity provider (OIDC_ISSUER): otherwise nobody "
                "could sign in"
            )
        return
    _require_url("OIDC_ISSUER", issuer)
    if not client_id:
        raise ImproperlyConfigured("OIDC_ISSUER is set, so OIDC_CLIENT_ID must be too")
    if given and len(given) != len(ENDPOINT_SETTINGS):
        missing = [n for k, n in ENDPOINT_SETTINGS.items() if not endpoints.get(k)]
        raise ImproperlyConfigured(
            f"Set all of the provider's endpoints or none (discovery finds them): "
            f"{', '.join(missing)} missing"
        )
    for key, value in endpoints.items():
        if value:
            _require_url(ENDPOINT_SETTINGS[key], value)
    if "openid" not in scopes:
        raise ImproperlyConfigured(f"OIDC_SCOPES must include openid (it is {' '.join(scopes)!r})")
    if not _CLAIM_NAME.match(groups_claim):
        raise ImproperlyConfigured(f"OIDC_GROUPS_CLAIM is not a claim's name: {groups_claim!r}")
    if recheck_seconds < 0:
        raise ImproperlyConfigured("OIDC_GROUPS_RECHECK_SECONDS must be 0 (every request) or more")
    if token_groups_max_age_seconds <= 0:
        raise ImproperlyConfigured("OIDC_API_TOKEN_GROUPS_MAX_AGE_SECONDS must be more than 0")
    if timeout_seconds <= 0:
        raise ImproperlyConfigured("OIDC_TIMEOUT_SECONDS must be more than 0")
