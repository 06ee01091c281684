"""A real OpenID Provider for the tests: panva's oidc-provider (tests/oidc/provider/, pinned by
its package-lock.json, installed by `make oidc-provider`) in a Node.js process of its own, on a
free port, with keys made at start. One per test session (per xdist worker); tests change its
accounts while it runs.

`IdP.browse_to_callback` plays the browser at the provider (its real login page, its redirects)
with `requests`, and stops at the redirect back to the control plane, so that a test hands that
URL to Django's test client, which then talks to the provider itself: the code exchange, the
keys, userinfo.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import select
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import pytest
import requests

HERE = Path(__file__).resolve().parent / "provider"
SCRIPT = HERE / "provider.mjs"
REDIRECT_URI = "http://testserver/oidc/callback/"
CLIENT_ID = "controlplane"
SCOPES = ["openid", "profile", "email", "groups"]


@dataclass
class IdP:
    """The running provider, and the one client registered for Django's test client."""

    issuer: str
    control_token: str
    client_id: str = CLIENT_ID
    client_secret: str = field(default_factory=lambda: "cs-" + secrets.token_urlsafe(24))
    http: requests.Session = field(default_factory=requests.Session)
    clock_moved: bool = False

    # --- what a test changes at the provider -------------------------------------------------

    def _control(self, method: str, path: str, body: dict[str, Any] | None = None) -> None:
        response = self.http.request(
            method,
            f"{self.issuer}/__test__/{path}",
            json=body,
            headers={"X-Test-Control": self.control_token},
            timeout=10,
        )
        assert response.status_code == 204, response.text

    def account(
        self,
        sub: str,
        *,
        password: str,
        groups: Any = (),
        userinfo_only: tuple[str, ...] = (),
        **claims: Any,
    ) -> None:
        """Create or replace an account (sub is also its login name). `userinfo_only` names
        claims the provider leaves out of ID tokens."""
        claims.setdefault("preferred_username", sub)
        claims["groups"] = list(groups) if isinstance(groups, list | tuple) else groups
        body = {"password": password, "claims": claims, "userinfo_only": list(userinfo_only)}
        self._control("PUT", f"accounts/{sub}", body)

    def remove_account(self, sub: str) -> None:
        self._control("DELETE", f"accounts/{sub}")

    def move_clock(self, seconds: int) -> None:
        """The provider's clock, and so the expiry of everything it issued."""
        self._control("POST", "clock", {"offset_seconds": seconds})
        self.clock_moved = seconds != 0

    def last_token_response(self) -> dict[str, Any]:
        """What the provider's token endpoint last answered (access and ID token)."""
        response = self.http.get(
            f"{self.issuer}/__test__/last_token",
            headers={"X-Test-Control": self.control_token},
            timeout=10,
        )
        response.raise_for_status()
        answer: dict[str, Any] = response.json()
        return answer

    def register_client(self, redirect_uri: str) -> tuple[str, str]:
        """A client registered through the provider's own registration endpoint (RFC 7591),
        for a redirect URI known only at run time (a live server's port): (id, secret)."""
        response = self.http.post(
            f"{self.issuer}/reg",
            json={
                "redirect_uris": [redirect_uri],
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "client_secret_basic",
            },
            timeout=10,
        )
        assert response.status_code == 201, response.text
        return response.json()["client_id"], response.json()["client_secret"]

    def tamper_next_id_token(self, mode: str) -> None:
        self._control("POST", "tamper", {"mode": mode})

    def settings(self, client_id: str | None = None, client_secret: str | None = None) -> dict:
        return {
            "OIDC_ISSUER": self.issuer,
            "OIDC_CLIENT_ID": client_id or self.client_id,
            "OIDC_CLIENT_SECRET": client_secret or self.client_secret,
            "OIDC_ENDPOINTS": {},
            "OIDC_SCOPES": SCOPES,
            "OIDC_GROUPS_CLAIM": "groups",
            "OIDC_PROVIDER_NAME": "Test IdP",
        }

    # --- the browser's part, at the provider ---------------------------------------------------

    def browse_to_callback(
        self,
        authorize_url: str,
        *,
        login: str,
        password: str,
        browser: requests.Session | None = None,
    ) -> str:
        """Follow the provider's pages from its authorization URL as a browser would: its login
        form filled in and posted, consent given. Returns the URL the provider sends the
        browser back to (the control plane's callback, with code and state)."""
        browser = browser or requests.Session()
        url, method, data = authorize_url, "GET", None
        for _ in range(12):
            response = browser.request(method, url, data=data, allow_redirects=False, timeout=10)
            if response.is_redirect:
                url = urljoin(url, response.headers["Location"])
                method, data = "GET", None
                if not url.startswith(self.issuer):
                    return url
                continue
            form = re.search(r'<form method="post" action="([^"]+)"', response.text)
            assert response.status_code == 200 and form, (response.status_code, response.text)
            url, method = urljoin(url, form.group(1)), "POST"
            data = {"login": login, "password": password}
        raise AssertionError("the provider never sent the browser back")


def _start(node: str, idp: IdP, clients: list[dict[str, Any]], log: Path) -> subprocess.Popen[str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "CONTROL_TOKEN": idp.control_token,
        "CLIENTS": json.dumps(clients),
        "NODE_ENV": "test",
    }
    with log.open("w") as errors:
        return subprocess.Popen(
            [node, str(SCRIPT)],
            cwd=HERE,
            env=env,
            stdout=subprocess.PIPE,
            stderr=errors,  # a file: a pipe nobody reads would fill and stall the provider
            text=True,
        )


@pytest.fixture(scope="session")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IdP]:
    node = shutil.which("node")
    if node is None or not (HERE / "node_modules" / "oidc-provider").is_dir():
        pytest.fail(
            "The test OpenID Provider is not installed: run `make oidc-provider` (Node.js and "
            "npm, from the npm registry only)."
        )
    idp = IdP(issuer="", control_token=secrets.token_urlsafe(24))
    clients = [
        {
            "client_id": idp.client_id,
            "client_secret": idp.client_secret,
            "redirect_uris": [REDIRECT_URI],
        }
    ]
    log = tmp_path_factory.mktemp("idp") / "provider.log"
    proc = _start(node, idp, clients, log)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        line = proc.stdout.readline() if ready else ""
        if not line:
            proc.kill()
            raise RuntimeError(f"the OpenID Provider did not start:\n{log.read_text()}")
        idp.issuer = json.loads(line)["issuer"]
        yield idp
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def sso(settings: Any, idp: IdP) -> Iterator[IdP]:
    """The control plane configured for the test provider (its clock put back afterwards)."""
    for name, value in idp.settings().items():
        setattr(settings, name, value)
    yield idp
    if idp.clock_moved:
        idp.move_clock(0)
