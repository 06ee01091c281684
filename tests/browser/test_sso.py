"""Signing in at the team's identity provider in a real browser: the control plane's button,
the provider's own login page, back with the roles the provider's groups map to."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from controlplane.accounts.models import GroupRoleMapping, HostGroup
from controlplane.accounts.roles import OPERATOR, VIEWER
from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from tests import factories as f
from tests.browser.conftest import screenshot
from tests.oidc.flows import PASSWORD

pytestmark = pytest.mark.browser


def test_a_user_signs_in_through_the_providers_login_page(live_server, sso, settings, page):
    client_id, secret = sso.register_client(f"{live_server.url}/oidc/callback/")
    settings.OIDC_CLIENT_ID, settings.OIDC_CLIENT_SECRET = client_id, secret
    team_a = HostGroup.objects.create(name="team-a")
    team_a.hosts.add(f.make_host("gpu-01", port=1))
    prod = HostGroup.objects.create(name="prod")
    prod.hosts.add(f.make_host("gpu-09", port=1))
    GroupRoleMapping.objects.create(idp_group="gpu-ops", role=OPERATOR, host_group=team_a)
    GroupRoleMapping.objects.create(idp_group="prod-readers", role=VIEWER, host_group=prod)
    sso.account("tess", password=PASSWORD, groups=["gpu-ops"])

    page.goto(f"{live_server.url}/changes/")
    page.wait_for_url(f"{live_server.url}/login/?next=/changes/")
    screenshot(page, "15-sign-in-with-provider")
    page.get_by_role("link", name="Sign in with Test IdP").click()

    page.wait_for_url(f"{sso.issuer}/interaction/**")  # the provider's own page
    page.fill("input[name=login]", "tess")
    page.fill("input[name=password]", PASSWORD + "-wrong")
    page.get_by_role("button", name="Continue").click()
    expect(page.locator(".error")).to_have_text("Invalid login or password.")
    page.fill("input[name=login]", "tess")
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Continue").click()

    page.wait_for_url(f"{live_server.url}/changes/")
    expect(page.locator("header .who")).to_contain_text("sso:tess")
    expect(page.locator("header .who")).to_contain_text("operator on team-a")
    # Only the hosts of the groups the provider says tess is in: team-a's, not prod's.
    page.goto(f"{live_server.url}/")
    expect(page.locator("table#fleet")).to_contain_text("gpu-01")
    expect(page.locator("table#fleet")).not_to_contain_text("gpu-09")
    assert page.goto(f"{live_server.url}/hosts/gpu-09/").status == 404
    page.goto(f"{live_server.url}/")
    assert secret not in page.content()
    login = AuditEvent.objects.get(action=AuditAction.AUTH_LOGIN)
    assert login.data["actor_identity"] == {"issuer": sso.issuer, "subject": "tess"}

    with page.expect_response(f"{live_server.url}/logout/") as logout:
        page.get_by_role("button", name="Sign out").click()
    assert logout.value.status == 302
    page.wait_for_url(f"{live_server.url}/login/")
