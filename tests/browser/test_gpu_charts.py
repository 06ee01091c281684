"""The host page's GPU charts in a real browser: four uPlot charts, a line per GPU, windows."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, Route, expect

from tests import factories as f
from tests.browser.conftest import SCREENSHOTS, login
from tests.gpu_history import every, make_gpu_history, waves

pytestmark = pytest.mark.browser

# What a coming Content Security Policy will allow: scripts from the app's own static files only.
CSP = "script-src 'self'; object-src 'none'; base-uri 'self'"
WATTS = re.compile(r"^\d+\.\d W$")
UTC_TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d$")
CHARTS = """root => root._gpuCharts.map(u => ({
    series: u.series.slice(1).map(s => s.label),
    points: u.data[0].length,
    time: u.scales.x.time,
    axes: u.axes.map(a => a.label),
}))"""


def with_csp(route: Route) -> None:
    response = route.fetch()
    route.fulfill(response=response, headers={**response.headers, "content-security-policy": CSP})


# points on the first chart's time axis, or 0 before it is drawn
POINTS = "((document.getElementById('gpu-charts')._gpuCharts || [])[0]?.data[0].length || 0)"


def charts(page: Page) -> list[dict[str, Any]]:
    return page.locator("#gpu-charts").evaluate(CHARTS)


@pytest.fixture
def week_of_history(db: None) -> Any:
    host = f.make_host("gpu-01")
    f.make_deployment(host, f.make_catalog()["NVFP4"])
    f.make_snapshot(host)
    week = every(5, until=timezone.now(), span=dt.timedelta(days=7))
    make_gpu_history(host, times=week, readings=waves)
    return host


@pytest.fixture
def csp_violations(live_server, page) -> list[str]:
    """The host page served with the coming CSP; what the browser reports breaking it."""
    violations: list[str] = []
    page.on("console", lambda m: violations.append(m.text) if "Content Security" in m.text else 0)
    page.route(f"{live_server.url}/hosts/gpu-01/**", with_csp)
    page.route(f"{live_server.url}/hosts/gpu-01/", with_csp)
    return violations


def test_the_host_page_charts_each_gpu(week_of_history, csp_violations, live_server, viewer, page):
    login(page, live_server.url, viewer.username)
    page.goto(f"{live_server.url}/hosts/gpu-01/")
    section = page.locator("#gpu-charts")
    expect(section.locator(".uplot")).to_have_count(4)
    drawn = charts(page)
    assert [c["axes"] for c in drawn] == [
        ["time (UTC)", "memory used, %"],
        ["time (UTC)", "power, W"],
        ["time (UTC)", "utilisation, %"],
        ["time (UTC)", "temperature, °C"],
    ]
    for chart in drawn:
        assert chart["series"] == [f"GPU {n}" for n in range(8)]
        assert chart["time"] is True
        assert chart["points"] == 96  # the default window: a day in quarter hours
    expect(section.locator(".u-legend tr.u-series")).to_have_count(4 * 9)  # time + 8 GPUs
    expect(section.get_by_role("link", name="24 h")).to_have_attribute("aria-current", "true")

    # Hovering a chart shows each GPU's value at that time in the legend. (Scrolled first so
    # that the screenshot does not scroll the charts away from under the mouse.)
    section.evaluate("el => el.scrollIntoView({block: 'start'})")
    power = section.locator("[data-chart=power]")
    power.locator(".u-over").hover(position={"x": 300, "y": 40})
    expect(power.locator(".u-legend tr.u-series").nth(1).locator(".u-value")).to_have_text(WATTS)
    memory = section.locator("[data-chart=memory]")
    memory.locator(".u-over").hover(position={"x": 300, "y": 40})
    expect(memory.locator(".u-legend tr.u-series").nth(1).locator(".u-value")).to_contain_text(
        " % (avg "
    )
    expect(memory.locator(".u-legend tr.u-series").first.locator(".u-value")).to_have_text(UTC_TIME)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    section.screenshot(path=str(SCREENSHOTS / "08-gpu-charts.png"))
    assert csp_violations == []


def test_the_window_links_redraw_in_place(
    week_of_history, csp_violations, live_server, viewer, page
):
    login(page, live_server.url, viewer.username)
    page.goto(f"{live_server.url}/hosts/gpu-01/")
    section = page.locator("#gpu-charts")
    expect(section.locator(".uplot")).to_have_count(4)
    page.evaluate("window.__marker = 1")

    section.get_by_role("link", name="7 d").click()
    expect(section).to_have_attribute("data-window", "7d")
    expect(section.get_by_role("link", name="7 d")).to_have_attribute("aria-current", "true")
    page.wait_for_function(f"() => {POINTS} === 168")
    assert page.evaluate("window.__marker") == 1, "the page was reloaded"
    assert page.url.endswith("/hosts/gpu-01/?window=7d#gpu-charts")  # shareable
    assert all(len(c["series"]) == 8 for c in charts(page))

    # The address opens on its window.
    page.reload()
    expect(section.get_by_role("link", name="7 d")).to_have_attribute("aria-current", "true")
    page.wait_for_function(f"() => {POINTS} === 168")
    section.get_by_role("link", name="1 h").click()
    page.wait_for_function(f"() => {POINTS} === 60")
    assert csp_violations == []


def test_without_javascript_the_links_still_choose_a_window(live_server, viewer, browser):
    host = f.make_host("gpu-01")
    make_gpu_history(host, times=every(10, until=timezone.now(), span=dt.timedelta(hours=2)))
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        login(page, live_server.url, viewer.username)
        page.goto(f"{live_server.url}/hosts/gpu-01/")
        section = page.locator("#gpu-charts")
        expect(section).to_contain_text("The charts need JavaScript")
        section.get_by_role("link", name="1 h", exact=True).click()
        expect(section.get_by_role("link", name="1 h", exact=True)).to_have_attribute(
            "aria-current", "true"
        )
        json_link = section.get_by_role("link", name="gpu-series.json?window=1h")
        expect(json_link).to_have_attribute("href", "/hosts/gpu-01/gpu-series.json?window=1h")
    finally:
        context.close()
