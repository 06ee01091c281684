"""The change form's pre-flight in a real browser: it follows what is typed, in place."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, probe
from tests.fleet import register

pytestmark = pytest.mark.browser


def test_typing_tensor_parallel_3_updates_the_pre_flight_in_place(
    make_fleet, live_server, operator, page
):
    fleet = register(make_fleet(1))
    deployment = fleet.deployments[0]
    probe(fleet.host("gpu-01"))
    base = live_server.url

    login(page, base, operator.username)
    page.goto(f"{base}/deployments/{deployment.pk}/change/model_swap/")
    panel = page.locator("#preflight")
    expect(panel).to_contain_text("Pick a model")
    page.evaluate("window.__marker = 1")
    option = page.locator("select[name=model] option", has_text="INT4")
    page.select_option("select[name=model]", value=option.get_attribute("value"))
    expect(panel.locator("#preflight-fit")).to_contain_text("fits (tensor-parallel 8)")
    expect(panel).to_contain_text("no blocking problem")

    # Typed, not yet left: the panel follows after a pause in typing.
    page.locator("input[name=tensor_parallel_size]").press_sequentially("3")
    expect(panel.locator("#preflight-fit")).to_contain_text("does not fit (tensor-parallel 3)")
    expect(panel).not_to_contain_text("fits (tensor-parallel 8)")
    expect(panel).not_to_contain_text("no blocking problem")
    expect(panel.locator("#fit-per-gpu tbody tr")).to_have_count(3)

    # And back: what is typed now is what it checks.
    page.fill("input[name=tensor_parallel_size]", "8")
    page.locator("input[name=tensor_parallel_size]").dispatch_event("change")
    expect(panel.locator("#preflight-fit")).to_contain_text("fits (tensor-parallel 8)")
    expect(panel).to_contain_text("no blocking problem")

    # An engine argument the request refuses is refused in the panel as it is typed.
    page.locator("input[name=extra_args]").press_sequentially("--tensor-parallel-size=2")
    expect(panel.locator(".error")).to_contain_text("extra arguments")
    expect(panel).not_to_contain_text("no blocking problem")
    assert page.evaluate("window.__marker") == 1, "the page was reloaded"
