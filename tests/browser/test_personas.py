"""Each persona (operator, approver, administrator, viewer) through the pages they keep open, at
a phone's width (390 px), a laptop's (1,280) and a wide screen's (1,920): what each page leads
with, that nothing scrolls sideways and no control is cut off, and a decision reached from the
first screen, never past raw output. The screenshots (ux-<persona>-<page>-<width>.png, the
first screen of each page) are kept for the docs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from deployments import services
from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest, ModelArtifact
from tests.browser.conftest import SCREENSHOTS, login, probe
from tests.fleet import register

pytestmark = pytest.mark.browser

# (width, height): a phone held upright, a laptop, a desktop screen
WIDTHS = {390: 844, 1280: 800, 1920: 1080}

# Everything a person reads or uses must sit inside the window; a wide table of numbers may
# scroll inside its own frame (.table-scroll), which itself must fit. Hidden elements (inside a
# closed <details>, "Probe again" before the age turns red) are skipped.
OVERFLOWS = """() => {
  const width = window.innerWidth;
  const found = [];
  const page = document.scrollingElement.scrollWidth;
  if (page > width) found.push(`the page is ${page} px wide in a ${width} px window`);
  const shown = "a, button, input, select, textarea, summary, label, h1, h2, h3, nav, "
    + ".card, .status, .verdict, .gpubars, table, pre, .table-scroll, canvas";
  for (const el of document.querySelectorAll(shown)) {
    const frame = el.closest(".table-scroll");
    if (frame && frame !== el) continue;
    const box = el.getBoundingClientRect();
    if ((box.width === 0 && box.height === 0) || !el.checkVisibility()) continue;
    if (box.left < -0.5 || box.right > width + 0.5) {
      const kind = typeof el.className === "string" && el.className
        ? "." + el.className.split(" ")[0] : "";
      const name = el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + kind;
      const text = (el.innerText || "").trim().slice(0, 30);
      const span = `${Math.round(box.left)}..${Math.round(box.right)}`;
      found.push(`${name} "${text}" spans ${span}`);
    }
  }
  return found;
}"""


@pytest.fixture
def at(browser: Browser, live_server: Any) -> Iterator[Any]:
    """`at(width, user)`: a signed-in page in a window of that width (its own browser)."""
    contexts = []

    def open_at(width: int, user: Any) -> Page:
        context = browser.new_context(viewport={"width": width, "height": WIDTHS[width]})
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(15_000)
        login(page, live_server.url, user.username)
        return page

    yield open_at
    for context in contexts:
        context.close()  # closing one a test closed already does nothing


def fits(page: Page) -> None:
    """Nothing scrolls sideways and nothing is cut off at this width."""
    assert page.evaluate(OVERFLOWS) == [], f"at {page.viewport_size}: {page.url}"


def shot(page: Page, persona: str, name: str) -> None:
    """The first screen of the page, as a person sees it: what it leads with."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    width = (page.viewport_size or {})["width"]
    page.screenshot(path=str(SCREENSHOTS / f"ux-{persona}-{name}-{width}.png"))


def first_card(page: Page) -> str:
    """The id of the first card on the page: what it leads with."""
    return page.locator("main .card").first.get_attribute("id") or ""


def top(page: Page, selector: str) -> float:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, selector
    return box["y"]


def int4() -> ModelArtifact:
    return ModelArtifact.objects.get(name="moonshotai/Kimi-K2.5", variant="INT4")


def swap(user: Any, deployment: Any, snapshot: Any) -> ChangeRequest:
    return services.change_request_create(
        user=user, deployment=deployment, kind="model_swap", snapshot=snapshot,
        reason="INT4 serves more tokens per second", model=int4(),
    )  # fmt: skip


def test_an_operator_reads_the_fleet_and_asks_for_a_swap_at_every_width(
    make_fleet, live_server, operator, at
):
    fleet = register(make_fleet(1))
    host, deployment = fleet.host("gpu-01"), fleet.deployments[0]
    probe(host)
    base = live_server.url

    for width in WIDTHS:
        page = at(width, operator)
        row = page.locator(f"#fleet tr#host-row-{host.pk}")
        expect(page.locator("h1")).to_have_text("Fleet")
        expect(row).to_contain_text("kimi-k2.5")
        # the share of each GPU's memory is written under its bar, and the total beside them
        expect(row.locator(".gpubar-pct")).to_have_count(8)
        expect(row.locator(".gpubar-pct").first).to_have_text(re.compile(r"^\d{1,3}$"))
        expect(row.locator(".gpubars-total")).to_contain_text("GiB")
        expect(row.get_by_role("button", name="Probe now")).to_be_visible()
        expect(page.get_by_role("link", name="Approvals")).to_be_in_viewport()
        fits(page)
        shot(page, "operator", "fleet")

        row.get_by_role("link", name="gpu-01").click()
        page.wait_for_url(f"{base}/hosts/gpu-01/")
        assert first_card(page) in ("health", "maintenance")
        expect(page.locator("#health")).to_be_in_viewport()
        fits(page)
        shot(page, "operator", "host")

        page.locator(f"#deployment-{deployment.pk}").get_by_role("link", name="Swap model").click()
        page.wait_for_url(f"{base}/deployments/{deployment.pk}/change/model_swap/")
        assert first_card(page) == "decision-snapshot"
        page.select_option("select[name=model]", value=str(int4().pk))
        expect(page.locator("#preflight-fit")).to_contain_text("fits (tensor-parallel 8)")
        # an idle host with a clean engine and an ok snapshot: nothing to acknowledge
        expect(page.locator("#acknowledgements input")).to_have_count(0)
        fits(page)
        shot(page, "operator", "swap-form")
        if width != 1280:
            page.context.close()
            continue

        page.fill("textarea[name=reason]", "INT4 serves more tokens per second")
        page.click("#change-form button[type=submit]")
        page.wait_for_url(re.compile(rf"^{re.escape(base)}/changes/\d+/$"))
        expect(page.locator("#change-status")).to_have_text("waiting for approval")
        assert first_card(page) == "change-summary"
        panel = page.locator("#approval-panel")
        expect(panel.locator("#own-request")).to_contain_text("a second person")
        expect(panel.get_by_role("button", name="Approve")).to_have_count(0)
        expect(panel.get_by_role("button", name="Cancel")).to_have_count(0)
        fits(page)
        shot(page, "operator", "change-requested")


def test_an_approver_decides_from_the_first_screen_and_follows_the_change(
    make_fleet, celery_worker, live_server, operator, approver, at
):
    fleet = register(make_fleet(1))
    host = fleet.host("gpu-01")
    change = swap(operator, fleet.deployments[0], probe(host))
    probe(host)  # the approver decides on the latest snapshot
    base = live_server.url

    for width, height in WIDTHS.items():
        page = at(width, approver)
        page.goto(f"{base}/approvals/")
        expect(page.locator("h1")).to_have_text("Waiting for approval")
        expect(page.locator("#approvals")).to_contain_text("model swap")
        expect(page.locator("#rollouts-waiting")).to_contain_text("No rollout waits.")
        fits(page)
        shot(page, "approver", "approvals")

        page.locator("#approvals").get_by_role("link", name=f"#{change.pk}").click()
        page.wait_for_url(f"{base}/changes/{change.pk}/")
        # What is decided leads; the snapshot it rests on, with its age then, and the pre-flight.
        assert first_card(page) == "change-summary"
        expect(page.locator("#rests-on")).to_contain_text(re.compile(r"\d+ s old when requested"))
        expect(page.locator("#preflight-when-requested")).to_contain_text("Memory: fits")
        box = page.locator("#approval-panel")
        expect(box.get_by_role("button", name="Approve")).to_be_visible()
        if width == 1280:
            # A newcomer reaches the decision on the first screen, past no raw output.
            assert top(page, "#approval-panel") < height
            approve = box.get_by_role("button", name="Approve").bounding_box()
            assert approve is not None and approve["y"] + approve["height"] <= height
        raw = [b["y"] for b in (p.bounding_box() for p in page.locator("pre").all()) if b]
        assert all(y > top(page, "#approval-panel") for y in raw)
        fits(page)
        shot(page, "approver", "change-decision")
        if width != 1280:
            page.context.close()

    # A missing reason is answered in the page's own words, beside the field.
    page = at(1280, approver)
    page.goto(f"{base}/changes/{change.pk}/")
    box = page.locator("#approval-panel")
    box.get_by_role("button", name="Approve").click()
    page.wait_for_url(f"{base}/changes/{change.pk}/approve/")
    expect(page.locator("#approve-reason-error")).to_contain_text("needs visible text")
    assert ChangeRequest.objects.get(pk=change.pk).status == ChangeStatus.PENDING_APPROVAL
    box.get_by_placeholder("why you approve (required)").fill("fits, and the host is idle")
    box.get_by_role("button", name="Approve").click()
    page.wait_for_url(f"{base}/changes/{change.pk}/")
    expect(page.locator("#change-status")).to_have_text("succeeded", timeout=90_000)

    for width in WIDTHS:
        page = at(width, approver)
        page.goto(f"{base}/changes/{change.pk}/")
        assert first_card(page) == "change-summary"
        expect(page.locator("#outcome")).to_contain_text("after the change")
        expect(page.locator("#evaluation-summary")).to_contain_text("coherence suite")
        expect(page.locator("#approval-panel")).to_have_count(0)
        # the step log is one line a step; its commands and output stay folded
        expect(page.locator("#steps tbody tr.step").first).to_be_visible()
        expect(page.locator("#steps pre").first).to_be_hidden()
        fits(page)
        shot(page, "approver", "change-finished")


def test_an_administrator_approves_others_and_breaks_glass_only_on_their_own(
    make_fleet, live_server, operator, admin_user, at, settings, tmp_path
):
    settings.AUDIT_CHECKPOINT_DIR = tmp_path / "audit-checkpoints"  # not the developer's
    fleet = register(make_fleet(2))
    theirs = swap(operator, fleet.deployments[0], probe(fleet.host("gpu-01")))
    own = swap(admin_user, fleet.deployments[1], probe(fleet.host("gpu-02")))
    base = live_server.url

    for width in WIDTHS:
        page = at(width, admin_user)
        page.goto(f"{base}/changes/{theirs.pk}/")
        box = page.locator("#approval-panel")
        expect(box.get_by_role("button", name="Approve")).to_be_visible()
        expect(box.locator("#break-glass")).to_have_count(0)  # a second person: just approve
        fits(page)
        shot(page, "admin", "change-of-another")

        page.goto(f"{base}/changes/{own.pk}/")
        expect(box.get_by_role("button", name="Approve")).to_have_count(0)
        expect(box.locator("#own-request")).to_be_visible()
        box.locator("#break-glass summary").click()
        expect(box.get_by_role("button", name="Break glass and approve")).to_be_visible()
        fits(page)
        shot(page, "admin", "change-own")

        page.goto(f"{base}/audit/")
        page.evaluate("window.__marker = 1")
        page.locator("#verify-now").get_by_role("button", name="Verify now").click()
        expect(page.locator("#audit-integrity")).to_contain_text("just now, for this page")
        expect(page.locator("#audit-integrity")).to_contain_text("up to the newest event")
        assert page.evaluate("window.__marker") == 1, "Verify now reloaded the page"
        fits(page)
        shot(page, "admin", "audit")
        page.context.close()


def test_a_viewer_reads_every_page_and_is_offered_nothing_to_press(
    make_fleet, live_server, operator, viewer, at
):
    fleet = register(make_fleet(1))
    host = fleet.host("gpu-01")
    change = swap(operator, fleet.deployments[0], probe(host))
    base = live_server.url

    for width in WIDTHS:
        page = at(width, viewer)
        expect(page.locator(f"#host-row-{host.pk}")).to_contain_text("kimi-k2.5")
        expect(page.get_by_role("button", name="Probe now")).to_have_count(0)
        fits(page)
        shot(page, "viewer", "fleet")

        page.goto(f"{base}/hosts/gpu-01/")
        expect(page.locator("h1")).to_contain_text("gpu-01")
        expect(page.locator("#gpu-charts .uplot")).to_have_count(4)
        fits(page)
        shot(page, "viewer", "host")

        page.goto(f"{base}/changes/{change.pk}/")
        assert first_card(page) == "change-summary"
        box = page.locator("#approval-panel")
        expect(box.locator("#no-decision")).to_be_visible()
        expect(box.locator("form button")).to_have_count(0)
        expect(page.get_by_role("button", name="Cancel")).to_have_count(0)
        fits(page)
        shot(page, "viewer", "change")

        page.goto(f"{base}/approvals/")
        expect(page.locator("#approvals-count")).to_have_text("1 waiting")
        fits(page)
        page.goto(f"{base}/audit/")
        expect(page.locator("#audit-rows tr").first).to_be_visible()
        fits(page)
        page.context.close()
