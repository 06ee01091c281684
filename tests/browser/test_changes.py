"""Change requests in a real browser: the two-person model swap, and stale snapshots refused."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest, ModelArtifact
from hosts.models import StateSnapshot
from tests.browser.conftest import login, probe, screenshot
from tests.fleet import register

pytestmark = pytest.mark.browser

UNIT = "vllm-kimi-k25.service"
NVFP4_PATH = "/models/moonshotai/Kimi-K2.5-NVFP4"
INT4_PATH = "/models/moonshotai/Kimi-K2.5-INT4"


def test_two_person_model_swap_from_request_to_after_snapshot(
    make_fleet, celery_worker, live_server, operator, approver, page, new_page
):
    fleet = register(make_fleet(1))
    host = fleet.host("gpu-01")
    deployment = fleet.deployments[0]
    probe(host)
    base = live_server.url

    # The operator requests the swap.
    login(page, base, operator.username)
    expect(page.locator(f"#host-row-{host.pk}")).to_contain_text("kimi-k2.5")
    screenshot(page, "01-dashboard")

    page.get_by_role("link", name="gpu-01", exact=True).click()
    page.wait_for_url(f"{base}/hosts/gpu-01/")
    expect(page.locator("#host-summary")).to_contain_text(NVFP4_PATH)
    screenshot(page, "02-host-page")

    page.locator(f"#deployment-{deployment.pk}").get_by_role("link", name="Swap model").click()
    page.wait_for_url(f"{base}/deployments/{deployment.pk}/change/model_swap/")
    card = page.locator("#decision-snapshot")
    expect(card.locator(".model-served")).to_contain_text("kimi-k2.5")
    expect(card.locator(".refusal")).to_have_count(0)
    option = page.locator("select[name=model] option", has_text="INT4")
    expect(option).to_have_count(1)
    expect(option).to_have_text("moonshotai/Kimi-K2.5 (INT4)")
    page.select_option("select[name=model]", value=option.get_attribute("value"))
    # Picking a model re-runs the fit check in place (htmx).
    expect(page.locator("#preflight")).to_contain_text("Memory:")
    expect(page.locator("#preflight .error")).to_have_count(0)
    page.fill("textarea[name=reason]", "INT4 serves more tokens per second")
    screenshot(page, "03-swap-form")

    page.click("#change-form button[type=submit]")
    page.wait_for_url(re.compile(rf"^{re.escape(base)}/changes/\d+/$"))
    change = ChangeRequest.objects.get()
    assert page.url == f"{base}/changes/{change.pk}/"
    expect(page.locator("#change-status")).to_have_text("waiting for approval")
    expect(page.locator("#steps")).to_contain_text("Waiting for approval.")
    screenshot(page, "04-change-requested")
    page.evaluate("window.__marker = 1")

    # A second person, in another browser, approves it on the latest snapshot.
    other = new_page()
    login(other, base, approver.username)
    other.goto(f"{base}/approvals/")
    other.locator("#approvals").get_by_role("link", name=f"#{change.pk}").click()
    other.wait_for_url(f"{base}/changes/{change.pk}/")
    panel = other.locator("#approval-panel")
    expect(panel.locator("#decision-snapshot")).to_contain_text("kimi-k2.5")
    if panel.locator(".refusal").count():
        # The snapshot went stale meanwhile: probe and review again (reloads after 2.5 s).
        other.evaluate("window.__marker = 1")
        panel.get_by_role("button", name="Probe and review again").click()
        other.wait_for_function("() => window.__marker === undefined", timeout=15_000)
        expect(panel.locator(".refusal")).to_have_count(0)
    screenshot(other, "05-approval")
    approve = panel.get_by_role("button", name="Approve")
    expect(approve).to_be_enabled()
    panel.get_by_placeholder("why you approve (required)").fill("fits, and the host is idle")
    approve.click()
    other.wait_for_url(f"{base}/changes/{change.pk}/")
    expect(other.locator(".messages")).to_contain_text(f"Change #{change.pk}: queued.")
    expect(other.locator("#approval-panel")).to_have_count(0)
    other.evaluate("window.__marker = 1")

    # The change page polls and fills the steps live until the job has finished.
    expect(other.locator("#change-status")).to_have_text("succeeded", timeout=60_000)
    steps = other.locator("#steps tbody tr.step")
    expect(steps.first).to_be_visible()
    expect(other.locator("#steps")).to_contain_text("post-change snapshot")
    expect(other.locator("#steps .status-failed")).to_have_count(0)
    before, after = (
        other.locator("#before-after section").nth(0),
        other.locator("#before-after section").nth(1),
    )
    expect(after.locator(".model-served")).to_contain_text(INT4_PATH)
    expect(before.locator(".model-served")).to_contain_text("NVFP4")
    screenshot(other, "06-job-finished")
    assert other.evaluate("window.__marker") == 1, "the change page was reloaded"

    # The requester's page, open all along, also caught up without a reload.
    expect(page.locator("#change-status")).to_have_text("succeeded", timeout=10_000)
    expect(page.locator("#before-after")).to_contain_text(INT4_PATH)
    assert page.evaluate("window.__marker") == 1, "the requester's page was reloaded"

    # A reload also shows the whole story in the change's audit events.
    other.reload()
    audit = other.locator("section", has=other.get_by_role("heading", name="Audit events"))
    for action in ("change.requested", "change.approved", "change.step", "change.succeeded"):
        expect(audit).to_contain_text(action)

    change.refresh_from_db()
    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    assert steps.count() == change.steps.count()
    assert fleet.state("gpu-01")["units"][UNIT]["model_path"] == INT4_PATH
    deployment.refresh_from_db()
    assert deployment.model == ModelArtifact.objects.get(
        name="moonshotai/Kimi-K2.5", variant="INT4"
    )


def test_a_stale_snapshot_is_refused_in_place_with_a_probe_button(
    make_fleet, celery_worker, live_server, operator, page, settings
):
    settings.SNAPSHOT_MAX_AGE_SECONDS = 1
    fleet = register(make_fleet(1))
    host = fleet.host("gpu-01")
    deployment = fleet.deployments[0]
    stale = probe(host)
    base = live_server.url

    login(page, base, operator.username)
    page.wait_for_timeout(1_500)
    page.goto(f"{base}/deployments/{deployment.pk}/change/restart/")
    card = page.locator("#decision-snapshot")
    expect(card.get_by_role("link", name=f"#{stale.pk}")).to_be_visible()
    refusal = card.locator(".refusal")
    expect(refusal).to_contain_text(f"snapshot #{stale.pk} is")
    expect(refusal).to_contain_text("the limit is 1 s. Probe again.")
    submit = page.locator("#change-form button[type=submit]")
    expect(submit).to_be_disabled()
    expect(submit).to_have_attribute("title", "needs a fresh ok snapshot")
    screenshot(page, "07-stale-refused")

    page.evaluate("window.__marker = 1")
    refusal.get_by_role("button", name="Probe and review again").click()
    settings.SNAPSHOT_MAX_AGE_SECONDS = 300
    # The button queues a probe and reloads the page 2.5 s later.
    page.wait_for_function("() => window.__marker === undefined", timeout=15_000)
    page.wait_for_load_state()
    fresh = StateSnapshot.objects.filter(host=host).order_by("-pk").first()
    assert fresh.pk != stale.pk, "the worker did not store a new snapshot before the reload"
    assert fresh.trigger == "manual"
    expect(card.get_by_role("link", name=f"#{fresh.pk}")).to_be_visible()
    expect(card.locator(".refusal")).to_have_count(0)
    expect(submit).to_be_enabled()
    expect(page.locator("input[name=snapshot_id]")).to_have_value(str(fresh.pk))


def test_an_approver_probes_and_reviews_a_stale_request_again(
    make_fleet, celery_worker, live_server, operator, approver, page, settings
):
    from deployments import services

    fleet = register(make_fleet(1))
    host = fleet.host("gpu-01")
    change = services.change_request_create(
        user=operator, deployment=fleet.deployments[0], kind="model_swap", snapshot=probe(host),
        reason="INT4 serves more tokens per second",
        model=ModelArtifact.objects.get(name="moonshotai/Kimi-K2.5", variant="INT4"),
    )  # fmt: skip
    settings.SNAPSHOT_MAX_AGE_SECONDS = 1
    base = live_server.url

    login(page, base, approver.username)
    page.wait_for_timeout(1_500)
    page.goto(f"{base}/changes/{change.pk}/")
    panel = page.locator("#approval-panel")
    expect(panel.locator(".refusal")).to_contain_text("the limit is 1 s")
    expect(panel.get_by_role("button", name="Approve")).to_be_disabled()

    page.evaluate("window.__marker = 1")
    panel.get_by_role("button", name="Probe and review again").click(timeout=3_000)
    settings.SNAPSHOT_MAX_AGE_SECONDS = 300
    page.wait_for_function("() => window.__marker === undefined", timeout=15_000)
    page.wait_for_load_state()
    expect(panel.locator(".refusal")).to_have_count(0)
    panel.get_by_placeholder("why you approve (required)").fill("reviewed on a fresh snapshot")
    panel.get_by_role("button", name="Approve").click()
    expect(page.locator("#change-status")).not_to_have_text("waiting for approval")
