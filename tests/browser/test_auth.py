"""Signing in and out in a real browser."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login
from tests.conftest import PASSWORD

pytestmark = pytest.mark.browser


def test_a_wrong_password_is_refused_with_a_message(live_server, operator, page):
    page.goto(f"{live_server.url}/")
    page.wait_for_url(f"{live_server.url}/login/?next=/")
    page.fill("input[name=username]", operator.username)
    page.fill("input[name=password]", PASSWORD + "-wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator(".error")).to_have_text(
        "Your user name and password didn't match. Please try again."
    )
    assert page.url.startswith(f"{live_server.url}/login/")
    expect(page.locator("header .who")).to_have_count(0)

    # The right password then works, and the original destination is kept.
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{live_server.url}/")
    expect(page.locator("header .who")).to_contain_text(operator.username)


def test_sign_out_posts_with_csrf_and_ends_the_session(live_server, operator, page):
    login(page, live_server.url, operator.username)
    expect(page.locator("header .who")).to_contain_text(operator.username)
    with page.expect_response(f"{live_server.url}/logout/") as logout:
        page.get_by_role("button", name="Sign out").click()
    assert logout.value.request.method == "POST"
    assert logout.value.status == 302  # a missing CSRF token would be a 403
    page.wait_for_url(f"{live_server.url}/login/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.locator("header .who")).to_have_count(0)

    page.goto(f"{live_server.url}/hosts/gpu-01/")
    page.wait_for_url(f"{live_server.url}/login/?next=/hosts/gpu-01/")
