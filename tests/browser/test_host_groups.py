"""A person whose role holds on one host group, in a real browser: the fleet page shows only
that group's hosts (and offers only that group in its filter); a host of another group is not
found, as if it did not exist."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot

pytestmark = pytest.mark.browser


def test_an_operator_of_team_a_sees_team_a_only(live_server, teams, scoped, page):
    tess = scoped("tess", "operator", "team-a")
    login(page, live_server.url, tess.username)
    expect(page.locator("header .who")).to_contain_text("tess (operator on team-a)")
    rows = page.locator("#fleet tbody tr")
    expect(rows).to_have_count(2)
    assert sorted(rows.evaluate_all("rows => rows.map(r => r.dataset.host)")) == [
        "gpu-02", "gpu-03"
    ]  # fmt: skip
    expect(page.locator("#verdict-counts")).to_contain_text("2 unknown")
    expect(page.locator("#id_group option")).to_have_text(["any group", "team-a"])
    expect(page.get_by_role("button", name="Probe now")).to_have_count(2)  # hers to probe
    screenshot(page, "15-fleet-team-a")

    # Searching for the prod host finds nothing, and its page is not found.
    page.fill("input[name=q]", "gpu-01")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#fleet tbody tr")).to_have_count(0)
    expect(page.get_by_text("No host matches these filters.")).to_be_visible()
    response = page.goto(f"{live_server.url}/hosts/gpu-01/")
    assert response is not None and response.status == 404
    expect(page.get_by_role("heading", name="Not Found")).to_be_visible()

    # Her own hosts open, with their groups.
    page.goto(f"{live_server.url}/hosts/gpu-02/")
    expect(page.locator("#host-groups")).to_have_text("groups: prod team-a")
