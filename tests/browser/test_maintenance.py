"""Maintenance in a real browser: an operator enters it from the host page (htmx swaps the card,
a refused form comes back with its error), the fleet page shows the badge and counts it, and
ending it early takes both away."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from hosts.models import Host
from tests import factories as f
from tests.browser.conftest import login, screenshot

pytestmark = pytest.mark.browser


def test_enter_and_leave_maintenance_from_the_host_page(live_server, operator, page):
    host = f.make_host("gpu-01")
    f.make_deployment(host, f.make_catalog()["NVFP4"])
    f.make_snapshot(host)
    login(page, live_server.url, operator.username)
    row = page.locator(f"#fleet tr#host-row-{host.pk}")
    expect(row).to_contain_text("gpu-01")
    expect(row.locator(".maintenance-badge")).to_have_count(0)
    expect(page.locator("#maintenance-count")).to_have_text("0 in maintenance")

    row.get_by_role("link", name="gpu-01").click()
    page.wait_for_url(f"{live_server.url}/hosts/gpu-01/")
    page.evaluate("window.__marker = 1")
    card = page.locator("#maintenance")
    card.get_by_text("Put gpu-01 in maintenance").click()
    until = card.locator("input[name=until]")
    expect(until).to_have_value(re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d$"))  # now + 4 h, offered
    # Spaces pass the browser's `required`; the server refuses them, and the card says why.
    card.locator("input[name=reason]").fill("   ")
    card.get_by_role("button", name="Enter maintenance").click()
    expect(card).to_contain_text("This field is required.")
    assert not Host.objects.get(pk=host.pk).in_maintenance()

    card.locator("input[name=reason]").fill("reseating GPU 3")
    card.get_by_role("button", name="Enter maintenance").click()
    expect(card).to_contain_text("In maintenance until")
    expect(card).to_contain_text("set by otto: reseating GPU 3")
    expect(card).to_contain_text("gpu-01 is in maintenance until")
    assert page.evaluate("window.__marker") == 1, "the page was reloaded"
    stored = Host.objects.get(pk=host.pk)
    assert stored.in_maintenance() and stored.maintenance_reason == "reseating GPU 3"
    assert stored.maintenance_until.strftime("%Y-%m-%dT%H:%M") == until.input_value()
    screenshot(page, "15-maintenance")

    page.goto(f"{live_server.url}/")
    badge = row.locator(".maintenance-badge")
    expect(badge).to_have_text("maintenance")
    expect(badge).to_have_attribute("title", re.compile("set by otto: reseating GPU 3$"))
    expect(page.locator("#maintenance-count")).to_have_text("1 in maintenance")
    page.locator("#maintenance-count").click()
    page.wait_for_url(re.compile(r"\?maintenance=yes$"))
    expect(page.locator("#fleet tbody tr")).to_have_count(1)

    page.goto(f"{live_server.url}/hosts/gpu-01/")
    card.get_by_role("button", name="End maintenance now").click()
    expect(card).to_contain_text("gpu-01 is out of maintenance.")
    expect(card).not_to_contain_text("In maintenance until")
    assert not Host.objects.get(pk=host.pk).in_maintenance()
    page.goto(f"{live_server.url}/")
    expect(row.locator(".maintenance-badge")).to_have_count(0)
    expect(page.locator("#maintenance-count")).to_have_text("0 in maintenance")
