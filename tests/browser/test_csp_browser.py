"""The Content-Security-Policy in Chromium: the pages people use, served with the enforced policy
(controlplane/settings.py), with nothing blocked and everything still working.

The browser reports each blocked script, style, handler or eval both as a
`securitypolicyviolation` event and as a console error; both are collected on every page. And
since a blocked thing can fail quietly, what depended on it is exercised too: htmx swaps (the
fleet's rows refresh, Probe now, the audit filter), the charts, the confirmation before revoking
a token, and the admin's own scripts.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import ConsoleMessage, Dialog, Error, Page, Request, expect

from controlplane.api import services as token_services
from deployments import services as change_services
from deployments.models import ModelArtifact
from tests import factories as f
from tests.browser.conftest import login, probe
from tests.fleet import register
from tests.gpu_history import every, make_gpu_history, waves
from tests.revision_history import make_week_history

pytestmark = pytest.mark.browser

# Runs in every document before the page's own scripts (Playwright injects it, outside the
# page's policy) and hands each violation to the test.
REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolation(`${location.pathname}: ${e.effectiveDirective} blocked `
    + `${e.blockedURI || "inline"} (${e.sourceFile || "?"}:${e.lineNumber}) ${e.sample || ""}`);
});
"""


def watch(page: Page) -> tuple[list[str], list[str]]:
    """What the policy blocked, and what the console and the page said went wrong."""
    violations: list[str] = []
    complaints: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            complaints.append(f"{message.type}: {message.text}")

    def on_page_error(error: Error) -> None:
        complaints.append(f"page error: {error}")

    def on_violation(text: str) -> None:  # Playwright cannot wrap a builtin like list.append
        violations.append(text)

    page.expose_function("__cspViolation", on_violation)
    page.add_init_script(REPORT_VIOLATIONS)
    page.on("console", on_console)
    page.on("pageerror", on_page_error)
    return violations, complaints


def requests_to(page: Page, fragment: str) -> Callable[[], int]:
    """How many requests the page has sent to URLs containing `fragment` so far."""
    seen: list[str] = []

    def on_request(request: Request) -> None:
        if fragment in request.url:
            seen.append(request.url)

    page.on("request", on_request)
    return lambda: len(seen)


@pytest.fixture
def scene(make_fleet: Any, operator: Any, admin_user: Any) -> dict[str, Any]:
    """One simulated host with a day of GPU history and a swap waiting for approval; another
    host with the week of revisions (NVFP4 -> FP8 -> INT4) and their benchmarks."""
    fleet = register(make_fleet(1))
    host = fleet.host("gpu-01")
    make_gpu_history(
        host, times=every(15, until=timezone.now() - dt.timedelta(minutes=5),
                          span=dt.timedelta(hours=6)), readings=waves,
    )  # fmt: skip
    snapshot = probe(host)
    int4 = ModelArtifact.objects.get(name="moonshotai/Kimi-K2.5", variant="INT4")
    change = change_services.change_request_create(
        user=operator, deployment=fleet.deployments[0], kind="model_swap", snapshot=snapshot,
        reason="INT4 serves more tokens per second", model=int4,
    )  # fmt: skip
    week = make_week_history(f.make_host("gpu-77", port=1), operator)
    token_services.token_create(user=admin_user, name="ci-runner")
    return {"host": host, "change": change, "week": week, "snapshot": snapshot}


def test_every_page_keeps_to_the_policy_and_still_works(
    scene, celery_worker, live_server, admin_user, page
):
    base = live_server.url
    violations, complaints = watch(page)
    rows_polled = requests_to(page, "/hosts/rows/")
    page.clock.install()  # time flows as usual; fast_forward jumps to the fleet's next poll
    host = scene["host"]
    login(page, base, admin_user.username)

    # The fleet. Memory bars are SVG sized by attributes, not style="height: ..%".
    row = page.locator(f"#fleet tr#host-row-{host.pk}")
    expect(row).to_contain_text("kimi-k2.5")
    bars = row.locator(".gpubar rect")
    expect(bars).to_have_count(8)
    assert all((bars.nth(i).bounding_box() or {}).get("height", 0) > 20 for i in range(8))

    def rows_refresh_on_next_poll() -> None:
        row.evaluate("el => el.dataset.seen = 'yes'")  # a swapped-in row is a fresh element
        with page.expect_response(lambda r: "/hosts/rows/" in r.url):
            page.clock.fast_forward(16_000)
        expect(page.locator(f"#host-row-{host.pk}[data-seen]")).to_have_count(0)
        expect(row).to_contain_text("kimi-k2.5")

    # Every 15 s htmx refreshes the rows ...
    rows_refresh_on_next_poll()
    # ... except while a row polls for its own probe (app.js honours data-poll-unless, which
    # replaced an hx-trigger filter that htmx would have had to eval).
    polled = rows_polled()
    row.evaluate("el => el.setAttribute('data-probing', '')")
    page.clock.fast_forward(16_000)
    page.wait_for_timeout(500)
    assert rows_polled() == polled, "the rows were polled while a row was probing"
    row.evaluate("el => el.removeAttribute('data-probing')")
    rows_refresh_on_next_poll()

    # Probe now: htmx posts, the row polls every second until the worker stored the snapshot.
    page.evaluate("window.__marker = 1")
    row.get_by_role("button", name="Probe now").click()
    expect(row).to_contain_text("probing…")
    expect(row.get_by_role("button", name="Probe now")).to_be_visible(timeout=20_000)
    assert page.evaluate("window.__marker") == 1, "the page was reloaded"

    # The host page: its charts, and memory bars as SVG.
    page.goto(f"{base}/hosts/{host.name}/")
    expect(page.locator("#gpu-charts .uplot")).to_have_count(4)
    used = page.locator("#host-summary svg.membar rect")
    expect(used).to_have_count(8)
    widths = [float(used.nth(i).get_attribute("width") or 0) for i in range(8)]
    assert all(0 < w <= 100 for w in widths), widths

    # A change waiting for approval, with its decision forms.
    change = scene["change"]
    page.goto(f"{base}/changes/{change.pk}/")
    expect(page.locator("#change-status")).to_have_text("waiting for approval")
    expect(page.locator("#approval-panel input.reason-short")).to_have_count(2)

    # The revisions of a deployment, both benchmark charts.
    page.goto(f"{base}/deployments/{scene['week'].pk}/revisions/")
    expect(page.locator("#revision-charts .uplot")).to_have_count(2)

    # The audit log: the filter swaps the results in place.
    page.goto(f"{base}/audit/")
    page.evaluate("window.__marker = 1")
    page.fill("#audit-filter input[name=actor]", "otto")
    page.locator("#audit-filter button[type=submit]").click()
    expect(page.locator("#audit-rows tr").first).to_contain_text("otto")
    assert page.evaluate("window.__marker") == 1, "the filter reloaded the page"
    page.locator("#audit-rows a").first.click()
    expect(page.locator("#event-fields")).to_be_visible()

    # API tokens: revoking asks first (app.js, from data-confirm; it was an onclick).
    page.goto(f"{base}/api/v1/tokens/")
    revoke = page.get_by_role("button", name="Revoke")
    questions: list[str] = []

    def answer(dialog: Dialog, yes: bool) -> None:
        questions.append(dialog.message)
        dialog.accept() if yes else dialog.dismiss()

    page.once("dialog", lambda dialog: answer(dialog, yes=False))
    revoke.click()
    expect(revoke).to_be_visible()
    assert questions == ["Revoke ci-runner? Whatever uses it stops working."]
    page.once("dialog", lambda dialog: answer(dialog, yes=True))
    revoke.click()
    expect(page.get_by_role("button", name="Revoke")).to_have_count(0)

    # The API's own pages: Swagger UI and the browsable API.
    page.goto(f"{base}/api/v1/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("GPU control plane API")
    page.goto(f"{base}/api/v1/hosts/")
    expect(page.locator(".response-info")).to_contain_text("gpu-01")

    # The admin, including a form whose third-party inline script now comes from a file.
    page.goto(f"{base}/admin/")
    expect(page.locator("#site-name")).to_be_visible()
    page.goto(f"{base}/admin/django_celery_beat/periodictask/add/")
    expect(page.locator(".field-crontab_translation")).to_be_hidden()
    page.goto(f"{base}/admin/hosts/host/")
    expect(page.locator("#result_list")).to_contain_text("gpu-01")

    assert violations == [], "the policy blocked:\n" + "\n".join(violations)
    assert complaints == [], "the console says:\n" + "\n".join(complaints)
