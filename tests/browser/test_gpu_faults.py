"""GPU faults and an engine that died behind a live API, in a real browser, on a simulated fleet
of mixed hardware with the faults injected: the fleet page names each problem with its GPU and
reason, and the host page shows the evidence beside the GPU it concerns."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from hosts import services as host_services
from hosts.models import Host
from tests.browser.conftest import login, probe, screenshot
from tests.fleet import register

pytestmark = pytest.mark.browser


def probe_as_it_is(host: Host):
    """A probe that may end partial (the conftest helper insists on ok)."""
    return host_services.host_probe(host=Host.objects.get(pk=host.pk), trigger="manual")


def row_of(page, host):
    return page.locator(f"#fleet tr#host-row-{host.pk}")


def test_the_fleet_and_host_pages_name_each_gpu_fault(make_fleet, live_server, viewer, page):
    fleet = register(make_fleet(4, hardware={"gpu-01": "h200", "gpu-04": "h200"}))
    nvlinked, lost, memory, dead = (fleet.host(f"gpu-0{i}") for i in range(1, 5))
    for host in fleet.hosts:
        probe(host)
    fleet.set_fault("gpu-01", "nvlink_down")
    fleet.set_fault("gpu-01", "nvlink_errors")
    fleet.set_fault("gpu-02", "gpu_fell_off_bus")
    fleet.set_fault("gpu-03", "ecc_uncorrectable")
    fleet.set_fault("gpu-03", "pcie_downtrained")
    fleet.set_fault("gpu-04", "engine_core_died")
    probe(nvlinked)
    assert probe_as_it_is(lost).status == "partial"  # nvidia-smi cannot read one of its GPUs
    probe(memory)
    probe(dead)

    login(page, live_server.url, viewer.username)
    link = row_of(page, nvlinked)
    expect(link.locator(".verdict")).to_have_text("degraded")
    expect(link.locator(".reasons")).to_contain_text("GPU 1: NVLink 4 inactive (17 of 18 up)")
    expect(link.locator(".reasons")).to_contain_text("GPU 1: Xid 74, NVLink error")

    gone = row_of(page, lost)
    expect(gone.locator(".verdict")).to_have_text("failed")
    expect(gone.locator(".reasons")).to_contain_text("GPU 3 is lost")
    expect(gone.locator(".reasons")).to_contain_text("GPU 3: Xid 79, GPU has fallen off the bus")

    ecc = row_of(page, memory)
    expect(ecc.locator(".verdict")).to_have_text("failed")
    expect(ecc.locator(".reasons")).to_contain_text("GPU 2: Xid 48, double-bit ECC error")
    expect(ecc.locator(".reasons")).to_contain_text("GPU 2: 2 uncorrectable ECC errors")
    # The third reason is behind "and 1 more", whose title lists them all (worst first).
    more = ecc.locator(".reasons li.muted")
    expect(more).to_have_text("and 1 more")
    expect(more).to_have_attribute("title", re.compile("GPU 6: PCIe link at x8 of x16"))

    engine = row_of(page, dead)
    expect(engine.locator(".verdict")).to_have_text("failed")
    expect(engine.locator(".reasons")).to_contain_text("no process of it holds GPU memory")
    screenshot(page, "13-fleet-gpu-faults")

    # The host page shows the evidence beside the GPU it concerns, and the lost GPU on its own.
    page.goto(f"{live_server.url}/hosts/gpu-02/")
    gpus = page.locator("#gpu-details")
    expect(gpus.locator("tr.gpu-fault")).to_have_count(1)
    lost_row = gpus.locator("tr.gpu-fault")
    expect(lost_row).to_contain_text("not listed by nvidia-smi")
    expect(lost_row).to_contain_text("Xid 79")
    expect(lost_row).to_contain_text("GPU is lost")

    page.goto(f"{live_server.url}/hosts/gpu-01/")
    gpus = page.locator("#gpu-details")
    expect(gpus).to_contain_text("NVLink 143 of 144 links up")
    faulty = gpus.locator("table.gpu-details tbody tr.gpu-fault")
    expect(faulty).to_have_count(1)
    expect(faulty).to_contain_text("NVLink 4 inactive of 18")
    expect(faulty).to_contain_text("Xid 74")
    screenshot(page, "14-host-gpu-faults")
