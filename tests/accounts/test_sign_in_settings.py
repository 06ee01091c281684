"""Sign-in settings that could not work are refused at start, naming the setting, and never
quoting the client secret."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from controlplane.settings_parts.sign_in import check_sign_in, scopes_parse

ROOT = Path(__file__).resolve().parents[2]
SECRET = "cs-very-secret-value-0123456789"
ENDPOINTS = {
    "authorization_endpoint": "https://idp.example.com/auth",
    "token_endpoint": "https://idp.example.com/token",
    "userinfo_endpoint": "https://idp.example.com/me",
    "jwks_uri": "https://idp.example.com/jwks",
}


def check(**overrides: Any) -> None:
    values: dict[str, Any] = {
        "local_login": "on",
        "issuer": "https://idp.example.com",
        "client_id": "controlplane",
        "client_secret": SECRET,
        "endpoints": dict.fromkeys(ENDPOINTS, ""),
        "scopes": ["openid", "profile", "groups"],
        "groups_claim": "groups",
        "recheck_seconds": 300,
        "token_groups_max_age_seconds": 3600,
        "timeout_seconds": 5.0,
    }
    values.update(overrides)
    check_sign_in(**values)


def refused(**overrides: Any) -> str:
    with pytest.raises(ImproperlyConfigured) as caught:
        check(**overrides)
    assert SECRET not in str(caught.value)
    return str(caught.value)


def test_a_working_configuration_passes():
    check()
    check(endpoints=ENDPOINTS)  # every endpoint given: no discovery
    check(issuer="http://127.0.0.1:8080/realms/ops", local_login="off")  # a provider here
    check(issuer="", client_id="", client_secret="", local_login="admins")  # no provider


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"local_login": "sometimes"}, "LOCAL_LOGIN must be one of on, admins, off"),
        (
            {"issuer": "", "client_id": "", "client_secret": "", "local_login": "off"},
            "LOCAL_LOGIN=off needs an identity provider",
        ),
        ({"issuer": ""}, "OIDC_CLIENT_ID, OIDC_CLIENT_SECRET set without OIDC_ISSUER"),
        ({"issuer": "http://idp.example.com"}, "OIDC_ISSUER must be an https:// URL"),
        ({"issuer": "idp.example.com"}, "OIDC_ISSUER must be an https:// URL"),
        ({"issuer": "https://idp.example.com/?x=1"}, "must not carry a query"),
        ({"client_id": ""}, "OIDC_CLIENT_ID must be too"),
        (
            {
                "endpoints": {
                    **dict.fromkeys(ENDPOINTS, ""),
                    "token_endpoint": ENDPOINTS["token_endpoint"],
                }
            },
            "Set all of the provider's endpoints or none",
        ),
        ({"endpoints": {**ENDPOINTS, "jwks_uri": "http://idp.example.com/jwks"}}, "OIDC_JWKS_URI"),
        ({"scopes": ["profile", "groups"]}, "OIDC_SCOPES must include openid"),
        ({"groups_claim": "my groups"}, "OIDC_GROUPS_CLAIM is not a claim's name"),
        ({"recheck_seconds": -1}, "OIDC_GROUPS_RECHECK_SECONDS"),
        ({"token_groups_max_age_seconds": 0}, "OIDC_API_TOKEN_GROUPS_MAX_AGE_SECONDS"),
        ({"timeout_seconds": 0}, "OIDC_TIMEOUT_SECONDS"),
    ],
)
def test_what_cannot_work_is_refused_naming_the_setting(overrides, words):
    assert words in refused(**overrides)


def test_scopes_are_read_as_oauth_writes_them():
    assert scopes_parse("openid profile  email,groups") == ["openid", "profile", "email", "groups"]


def test_the_control_plane_refuses_to_start_on_them():
    env = {
        "PATH": os.environ["PATH"],
        "OIDC_ISSUER": "http://idp.example.com",
        "OIDC_CLIENT_ID": "controlplane",
        "OIDC_CLIENT_SECRET": SECRET,
        "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    assert "OIDC_ISSUER must be an https:// URL" in result.stderr
    assert SECRET not in result.stderr + result.stdout
