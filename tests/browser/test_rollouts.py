"""Rollouts in a real browser: a model swap over a fleet like the demo's in two waves, requested
on the form, approved once by a second person, followed live to the end; and a rollout whose
canary fails its coherence suite, which halts with the canary rolled back."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from deployments.models import ChangeRequest, ModelArtifact, Rollout, RolloutHost
from deployments.rollouts import requests
from deployments.rollouts.choices import RolloutHostStatus, RolloutStatus
from tests.browser.conftest import login, probe, screenshot
from tests.fleet import register

pytestmark = pytest.mark.browser

UNIT = "vllm-kimi-k25.service"
NVFP4 = "/models/moonshotai/Kimi-K2.5-NVFP4"
INT4 = "/models/moonshotai/Kimi-K2.5-INT4"


def test_a_model_swap_over_the_demo_fleet_in_two_waves(
    make_fleet, celery_worker, live_server, operator, approver, page, new_page
):
    # The demo's fleet: four hosts, gpu-02 an HGX H200 beside three RTX PRO 6000 hosts.
    fleet = register(make_fleet(4, hardware={"gpu-02": "h200"}))
    for host in fleet.hosts:
        probe(host)
    base = live_server.url

    login(page, base, operator.username)
    page.get_by_role("link", name="Rollouts").click()
    page.wait_for_url(f"{base}/rollouts/")
    page.locator("#new-rollout").click()
    page.wait_for_url(f"{base}/rollouts/new/")
    page.select_option("select[name=kind]", value="model_swap")
    int4 = page.locator("select[name=model] option", has_text="Kimi-K2.5 (INT4)")
    page.select_option("select[name=model]", value=int4.get_attribute("value"))
    for host in fleet.hosts:
        page.get_by_label(host.name, exact=True).check()
    page.fill("input[name=wave_size]", "3")
    page.fill("input[name=max_down]", "2")
    page.fill("textarea[name=reason]", "INT4 serves more tokens per second")
    screenshot(page, "30-rollout-form")
    page.get_by_role("button", name="Request rollout").click()
    page.wait_for_url(re.compile(rf"^{re.escape(base)}/rollouts/\d+/$"))
    rollout = Rollout.objects.get()
    expect(page.locator("#rollout-status")).to_have_text("waiting for approval")
    expect(page.locator("#waves")).to_contain_text("The canary")
    expect(page.locator("#waves")).to_contain_text("Wave 2")
    page.evaluate("window.__marker = 1")

    # A second person reviews what each host serves and approves once, for all of them.
    other = new_page()
    login(other, base, approver.username)
    other.goto(f"{base}/rollouts/{rollout.pk}/")
    review = other.locator("#rollout-review")
    expect(review.locator("#review-hosts tr")).to_have_count(5)
    expect(review.locator(".review-refusal")).to_have_count(0)
    screenshot(other, "31-rollout-review")
    review.get_by_placeholder("why you approve (required)").fill("the canary will tell")
    review.get_by_role("button", name="Approve the rollout").click()
    other.wait_for_url(f"{base}/rollouts/{rollout.pk}/")
    expect(other.locator("#rollout-review")).to_have_count(0)

    # The page follows the rollout live: the canary first, alone, then the second wave.
    canary = other.locator("#rollout-host-gpu-01")
    expect(canary.locator(".change-link")).to_be_visible(timeout=30_000)
    screenshot(other, "32-rollout-canary")
    expect(other.locator("#rollout-status")).to_have_text("succeeded", timeout=240_000)
    for host in fleet.hosts:
        row = other.locator(f"#rollout-host-{host.name}")
        expect(row.locator(".host-state")).to_have_text("changed, checks passed")
        expect(row.locator(".change-link")).to_be_visible()
    screenshot(other, "33-rollout-succeeded")
    # The requester's page, open all along, caught up without a reload.
    expect(page.locator("#rollout-status")).to_have_text("succeeded", timeout=10_000)
    assert page.evaluate("window.__marker") == 1, "the requester's page was reloaded"

    # Each host's change is a change like any other, one click away.
    other.locator("#rollout-host-gpu-02 .change-link").click()
    other.wait_for_url(re.compile(rf"^{re.escape(base)}/changes/\d+/$"))
    expect(other.locator("#change-status")).to_have_text("succeeded")
    rollout.refresh_from_db()
    assert rollout.status == RolloutStatus.SUCCEEDED and rollout.waves == 2
    for host in fleet.hosts:
        assert fleet.state(host.name)["units"][UNIT]["model_path"] == INT4
        assert ChangeRequest.objects.filter(host=host).count() == 1
    # The canary went alone: the second wave's changes were requested once its change ended
    # (read from the record, not from what the page happened to show between two polls).
    canary_change = ChangeRequest.objects.get(host__name="gpu-01")
    assert canary_change.finished_at is not None
    for later in ChangeRequest.objects.exclude(pk=canary_change.pk):
        assert later.created_at >= canary_change.finished_at, later


def test_a_canary_failing_its_coherence_suite_halts_and_is_rolled_back(
    make_fleet, celery_worker, live_server, operator, approver, page
):
    fleet = register(make_fleet(3))
    fleet.set_fault("gpu-01", "incoherent", models=[INT4])  # this build answers nonsense there
    for host in fleet.hosts:
        probe(host)
    rollout = requests.rollout_create(
        user=operator, kind="model_swap", reason="INT4 serves more tokens per second",
        model=ModelArtifact.objects.get(name="moonshotai/Kimi-K2.5", variant="INT4"),
        hosts=list(fleet.hosts), wave_size=2, max_down=2,
    )  # fmt: skip
    base = live_server.url
    login(page, base, approver.username)
    page.goto(f"{base}/rollouts/{rollout.pk}/")
    review = page.locator("#rollout-review")
    review.get_by_placeholder("why you approve (required)").fill("the canary will tell")
    review.get_by_role("button", name="Approve the rollout").click()

    expect(page.locator("#rollout-status")).to_have_text("halted and rolled back", timeout=120_000)
    banner = page.locator("#halted-banner")
    expect(banner).to_contain_text("the canary failed a check: gpu-01: coherence suite")
    canary = page.locator("#rollout-host-gpu-01")
    expect(canary.locator(".host-state")).to_have_text("rolled back")
    expect(canary.locator(".gate-failure")).to_contain_text("coherence suite after the change")
    for name in ("gpu-02", "gpu-03"):
        expect(page.locator(f"#rollout-host-{name} .host-state")).to_have_text("not reached")
    screenshot(page, "34-rollout-halted")
    page.locator("#rollout-host-gpu-01 .change-link").click()
    page.wait_for_url(re.compile(rf"^{re.escape(base)}/changes/\d+/$"))
    expect(page.locator("#change-status")).to_have_text("rolled back")

    assert fleet.state("gpu-01")["units"][UNIT]["model_path"] == NVFP4
    assert not ChangeRequest.objects.exclude(host__name="gpu-01").exists()
    statuses = dict(RolloutHost.objects.filter(rollout=rollout).values_list("host__name", "status"))
    assert statuses == {
        "gpu-01": RolloutHostStatus.ROLLED_BACK,
        "gpu-02": RolloutHostStatus.NOT_REACHED,
        "gpu-03": RolloutHostStatus.NOT_REACHED,
    }
