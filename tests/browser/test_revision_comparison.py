"""The revision comparison page in a real browser: the week NVFP4 -> FP8 -> INT4 on one page,
both benchmark charts drawn by the static script under the coming Content Security Policy."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests import factories as f
from tests.browser.conftest import login, screenshot
from tests.browser.test_gpu_charts import with_csp
from tests.revision_history import make_week_history

pytestmark = pytest.mark.browser

CHARTS = """root => root._revisionCharts.map(u => ({
    series: u.series.slice(1).map(s => s.label),
    levels: Array.from(u.data[0]),
    axes: u.axes.map(a => a.label),
}))"""


def test_the_week_on_one_page(live_server, operator, viewer, page):
    deployment = make_week_history(f.make_host("gpu-01"), operator)
    violations: list[str] = []
    page.on("console", lambda m: violations.append(m.text) if "Content Security" in m.text else 0)
    url = f"{live_server.url}/deployments/{deployment.pk}/revisions/"
    page.route(url + "**", with_csp)

    login(page, live_server.url, viewer.username)
    page.goto(url + "?a=3&b=4")
    section = page.locator("#revision-charts")
    expect(section.locator(".uplot")).to_have_count(2)
    drawn = section.evaluate(CHARTS)
    labels = ["r1 Kimi-K2.5 NVFP4", "r3 MiniMax-M2.5 FP8", "r4 Kimi-K2.5 INT4"]
    assert [c["series"] for c in drawn] == [labels, labels]
    assert all(c["levels"] == [1, 8, 32, 64] for c in drawn)
    assert [c["axes"] for c in drawn] == [
        ["concurrent streams", "output tok/s"],
        ["concurrent streams", "TTFT p50, ms"],
    ]
    int4 = page.locator('[data-revision="4"][data-concurrency="64"]')
    assert 2200 * 0.9 <= float(int4.get_attribute("data-tok-s")) <= 2200 * 1.1
    expect(page.locator("#revision-4")).to_contain_text("serving")
    expect(page.locator("#unit-diff .diff-add").first).to_be_visible()
    expect(page.locator("#coherence-results")).to_contain_text("five-token prompt")
    screenshot(page, "09-revision-comparison")
    assert violations == []
