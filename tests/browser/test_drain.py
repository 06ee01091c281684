"""A drained restart in a real browser: on a busy simulated host, the operator chooses the load
balancer's drain hook, and the change page shows the job waiting for the requests in flight to
reach zero before it restarts, then putting the host back."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from deployments.choices import ChangeStatus, DrainState
from deployments.models import ChangeRequest
from tests.browser.conftest import login, probe, screenshot
from tests.fleet import register

pytestmark = pytest.mark.browser

DRAIN = "drain: take the host out of rotation (sim-lb)"
WAIT = "wait for requests in flight to reach 0 (up to 120 s)"
UNDRAIN = "undrain: put the host back (sim-lb)"


def test_a_drained_restart_on_a_busy_host_waits_for_in_flight_to_reach_zero(
    make_fleet, celery_worker, live_server, operator, page
):
    fleet = register(make_fleet(1))
    fleet.set_inflight("gpu-01", 5, 1)
    fleet.set_request_seconds(80)  # four real seconds at the tests' time scale
    deployment = fleet.deployments[0]
    probe(fleet.host("gpu-01"))
    base = live_server.url

    login(page, base, operator.username)
    page.goto(f"{base}/deployments/{deployment.pk}/change/restart/")
    expect(page.locator("#preflight")).to_contain_text("Busy: 6 requests in flight")
    expect(page.locator("#preflight-clear")).to_have_count(0)  # dropping them needs consent
    page.select_option("select[name=drain_hook]", label="sim-lb")
    # The pre-flight follows the form (htmx): drained, the requests are waited for instead.
    expect(page.locator("#preflight-drains")).to_contain_text("waits for them")
    expect(page.locator("#preflight-clear")).to_be_visible()
    page.fill("input[name=drain_deadline_seconds]", "120")
    page.fill("textarea[name=reason]", "pick up the patched kernel without dropping requests")
    screenshot(page, "drain-01-restart-form")

    page.click("#change-form button[type=submit]")
    page.wait_for_url(re.compile(rf"^{re.escape(base)}/changes/\d+/$"))
    change = ChangeRequest.objects.get()
    expect(page.locator("#drain-plan")).to_contain_text("sim-lb")
    expect(page.locator("#drain-plan")).to_contain_text("waits up to 120 s")

    # The page follows the job live: the wait step's readings go down to zero.
    wait = page.locator("#steps tbody tr.step", has_text=WAIT)
    expect(wait).to_contain_text("6 in flight (5 running, 1 waiting)", timeout=60_000)
    expect(wait).to_contain_text("0 in flight (0 running, 0 waiting)", timeout=60_000)
    screenshot(page, "drain-02-waiting")
    expect(page.locator("#change-status")).to_have_text("succeeded", timeout=90_000)
    expect(page.locator("#drain-state")).to_have_text("back in rotation")
    screenshot(page, "drain-03-finished")

    names = page.locator("#steps tbody tr.step td:nth-child(2)").all_inner_texts()
    assert names.index(DRAIN) < names.index(WAIT) < names.index("systemctl restart")
    assert names[-1] == UNDRAIN
    change.refresh_from_db()
    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    assert change.drain_state == DrainState.UNDRAINED
    assert fleet.in_rotation("gpu-01")
