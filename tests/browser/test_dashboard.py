"""The fleet page and the host page in a real browser: Probe now in place, roles."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from hosts.models import StateSnapshot
from tests.browser.conftest import login, probe
from tests.fleet import register

pytestmark = pytest.mark.browser

AGE_AT_LEAST_2 = re.compile(r"^([2-9]|\d{2,}) s ago$")
AGE_JUST_NOW = re.compile(r"^[0-2] s ago$")


def test_probe_now_resets_the_snapshot_age_without_a_reload(
    make_fleet, celery_worker, live_server, operator, page
):
    fleet = register(make_fleet(2))
    host = fleet.host("gpu-01")
    for h in fleet.hosts:
        probe(h)
    before = StateSnapshot.objects.filter(host=host).count()

    login(page, live_server.url, operator.username)
    row = page.locator(f"#fleet tr#host-row-{host.pk}")
    age = row.locator(".snapshot-age span[data-age]")
    expect(row).to_contain_text("gpu-01")
    expect(age).to_have_text(AGE_AT_LEAST_2, timeout=10_000)  # app.js counts up every second
    page.evaluate("window.__marker = 1")

    row.get_by_role("button", name="Probe now").click()
    expect(row).to_contain_text("probing…")
    expect(row.get_by_role("button", name="Probe now")).to_have_count(0)
    # The row polls every second until the worker stored the snapshot, then swaps itself.
    expect(row.get_by_role("button", name="Probe now")).to_be_visible(timeout=20_000)
    expect(row).not_to_contain_text("probing…")
    expect(age).to_have_text(AGE_JUST_NOW)
    expect(row.locator("a.status")).to_have_text("ok")

    assert page.evaluate("window.__marker") == 1, "the page was reloaded"
    assert StateSnapshot.objects.filter(host=host).count() == before + 1
    latest = StateSnapshot.objects.filter(host=host).order_by("-pk").first()
    assert latest.trigger == "manual"
    # The other host's row was left alone.
    other = page.locator(f"#fleet tr#host-row-{fleet.host('gpu-02').pk}")
    expect(other.locator(".snapshot-age span[data-age]")).to_have_text(AGE_AT_LEAST_2)
    assert StateSnapshot.objects.filter(host=fleet.host("gpu-02")).count() == 1


def test_a_viewer_sees_no_action_buttons(make_fleet, live_server, viewer, page):
    fleet = register(make_fleet(1))
    host = fleet.host("gpu-01")
    probe(host)
    deployment = fleet.deployments[0]

    login(page, live_server.url, viewer.username)
    row = page.locator(f"#fleet tr#host-row-{host.pk}")
    expect(row).to_contain_text("kimi-k2.5")
    expect(page.get_by_role("button", name="Probe now")).to_have_count(0)
    expect(page.locator("form[action$='/probe/']")).to_have_count(0)

    row.get_by_role("link", name="gpu-01").click()
    page.wait_for_url(f"{live_server.url}/hosts/gpu-01/")
    expect(page.locator("#host-summary")).to_contain_text("kimi-k2.5")
    expect(page.locator(f"#deployment-{deployment.pk}")).to_contain_text("vllm-kimi-k25.service")
    for name in ("Probe now", "Probe + check engine files"):
        expect(page.get_by_role("button", name=name)).to_have_count(0)
    for name in (
        "Swap model",
        "Restart",
        "Stop",
        "Start",
        "Redeploy",
        "Roll back",
        "Repair engine",
    ):
        expect(page.get_by_role("link", name=name, exact=True)).to_have_count(0)
    expect(page.locator("a[href*='/change/']")).to_have_count(0)

    # Typing the address does not help either.
    response = page.goto(f"{live_server.url}/deployments/{deployment.pk}/change/model_swap/")
    assert response is not None and response.status == 403
