"""What the fleet page and the host page say about hosts with problems, in a real browser, on the
simulated fleet with faults injected: each problem named with its reason; the host page's
`systemctl status` and `nvidia-smi` facts; a partial snapshot that allows an acknowledged restart
and refuses a swap; and a rollback that writes the unit with its `Environment=` lines back byte
for byte (checked on the simulated host's own file)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from deployments import services
from deployments.choices import ChangeStatus
from deployments.execution import runner
from deployments.models import ChangeRequest, Deployment, ModelArtifact
from hosts import services as host_services
from hosts.models import Host
from simulator.state import DRIVER_VERSION
from tests.browser.conftest import login, probe, screenshot
from tests.fleet import register
from tests.waiting import wait_for_change

pytestmark = pytest.mark.browser

UNIT = "vllm-kimi-k25.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT}"


def probe_as_it_is(host: Host, *, integrity: bool = False):
    """A probe that may end partial or unreachable (the conftest helper insists on ok)."""
    return host_services.host_probe(
        host=Host.objects.get(pk=host.pk), trigger="manual", integrity=integrity
    )


def row_of(page, host):
    return page.locator(f"#fleet tr#host-row-{host.pk}")


def test_the_fleet_page_names_each_problem_with_its_reason(
    make_fleet, live_server, operator, viewer, page
):
    fleet = register(make_fleet(5))
    healthy, patched, unreachable, driver, incoherent = (
        fleet.host(f"gpu-0{i}") for i in range(1, 6)
    )
    for host in fleet.hosts:
        probe(host)
    # A restart on a model that answers nonsense: its coherence suite runs and fails.
    fleet.set_fault("gpu-05", "incoherent")
    restart = services.change_request_create(
        user=operator, deployment=Deployment.objects.get(host=incoherent), kind="restart",
        snapshot=probe(incoherent), reason="users report nonsense answers",
    )  # fmt: skip
    runner.change_execute(change_id=restart.pk)
    probe(incoherent)
    fleet.set_patched_engine("gpu-02")
    assert probe_as_it_is(patched, integrity=True).status == "ok"
    fleet.set_fault("gpu-03", "unreachable")
    assert probe_as_it_is(unreachable).status == "unreachable"
    fleet.set_fault("gpu-04", "gpu_driver_error")
    assert probe_as_it_is(driver).status == "partial"

    login(page, live_server.url, viewer.username)
    expect(row_of(page, healthy).locator(".verdict")).to_have_text("healthy")
    expect(row_of(page, healthy).locator(".serving")).to_contain_text("NVFP4")
    expect(row_of(page, healthy).locator(".engine")).to_have_text("clean")

    expect(row_of(page, patched).locator(".verdict")).to_have_text("degraded")
    expect(row_of(page, patched).locator(".reasons")).to_contain_text("differs from its install")
    expect(row_of(page, patched).locator(".engine")).to_have_text("patched")

    gone = row_of(page, unreachable)
    expect(gone.locator(".verdict")).to_have_text("unknown")
    expect(gone.locator(".reasons")).to_contain_text("unreachable for")
    expect(gone.locator(".reasons")).to_contain_text("last known good: snapshot #")
    # What it served when it was last seen, not "no deployment".
    expect(gone.locator(".service")).to_contain_text("last known good")
    expect(gone.locator(".service")).to_contain_text("active")
    expect(gone.locator(".serving")).to_contain_text("NVFP4")

    expect(row_of(page, driver).locator(".verdict")).to_have_text("failed")
    # One reason for one driver failure, although five nvidia-smi reads failed with it.
    expect(row_of(page, driver).locator(".reasons li")).to_have_count(1)
    expect(row_of(page, driver).locator(".reasons")).to_contain_text("GPUs unreadable")
    expect(row_of(page, driver).locator(".gpubars")).to_have_text("unknown")
    # A failed probe's age is not shown as a fresh (green) one.
    expect(gone.locator(".snapshot-age .age")).not_to_have_class(re.compile("fresh"))
    expect(row_of(page, incoherent).locator(".verdict")).to_have_text("failed")
    expect(row_of(page, incoherent).locator(".reasons")).to_contain_text("failed")
    expect(row_of(page, incoherent).locator(".reasons")).to_contain_text("factual")
    screenshot(page, "10-fleet-verdicts")

    # Worst first by default; a filter narrows to one verdict and says how many there are.
    order = page.locator("#fleet tbody tr").evaluate_all("rows => rows.map(r => r.dataset.host)")
    assert (
        order.index("gpu-04")
        < order.index("gpu-03")
        < order.index("gpu-02")
        < order.index("gpu-01")
    ), order
    page.locator("#verdict-counts").get_by_role("link", name="1 degraded", exact=True).click()
    page.wait_for_url(re.compile(r"\?verdict=degraded$"))
    expect(page.locator("#fleet tbody tr")).to_have_count(1)
    expect(row_of(page, patched)).to_be_visible()


def test_the_host_page_shows_what_systemctl_and_nvidia_smi_show(
    make_fleet, live_server, viewer, page
):
    fleet = register(make_fleet(1))
    host = fleet.host("gpu-01")
    probe(host)
    truth = fleet.state("gpu-01")

    login(page, live_server.url, viewer.username)
    page.goto(f"{live_server.url}/hosts/gpu-01/")
    expect(page.locator("#verdict")).to_have_text("healthy")
    unit = page.locator(f"#unit-{UNIT.replace('.', '')}")
    expect(unit).to_contain_text("active (running) since")
    for label in ("Main PID", "Tasks", "Memory", "CPU", "Restarts", "CGroup"):
        expect(unit.locator("dt", has_text=label)).to_have_count(1)
    main_pid = unit.locator("dt:text-is('Main PID') + dd")
    expect(main_pid).to_have_text(str(truth["units"][UNIT]["main_pid"]))

    gpus = page.locator("#gpu-details")
    expect(gpus).to_contain_text(f"Driver {DRIVER_VERSION}")
    expect(gpus).to_contain_text("CUDA ")
    expect(gpus.locator("table.gpu-details tbody tr")).to_have_count(8)
    expect(gpus.locator("table.gpu-details tbody tr").first).to_contain_text("Gen ")
    # Every engine process on the GPUs is named with the unit that owns it.
    processes = gpus.locator("table.gpu-processes tbody tr")
    expect(processes).to_have_count(8)
    expect(processes.filter(has_text=UNIT)).to_have_count(8)
    # The simulated hosts are PCIe machines: the page says so in one line, then the matrix.
    expect(gpus).to_contain_text("PCIe (SYS/NODE) between all GPUs, no NVLink")
    gpus.locator("summary", has_text="Topology").click()
    expect(gpus.locator("table.topology tr").nth(1)).to_have_text(re.compile(r"GPU0\s*X\s*NODE"))

    # The journal, read on demand in place.
    unit.get_by_role("link", name="Show the journal now").click()
    expect(unit.locator(".journal")).to_contain_text("Started")
    screenshot(page, "11-host-parity")


def test_a_partial_snapshot_allows_an_acknowledged_restart_and_refuses_a_swap(
    make_fleet, celery_worker, live_server, operator, page
):
    fleet = register(make_fleet(1))
    host = fleet.host("gpu-01")
    deployment = fleet.deployments[0]
    probe(host)
    fleet.set_fault("gpu-01", "gpu_driver_error")
    assert probe_as_it_is(host).status == "partial"
    base = live_server.url

    login(page, base, operator.username)
    page.goto(f"{base}/deployments/{deployment.pk}/change/model_swap/")
    card = page.locator("#decision-snapshot")
    expect(card.locator("#unknown-facts")).to_contain_text("GPU")
    expect(card.locator(".refusal")).to_be_visible()
    expect(page.locator("#change-form button[type=submit]")).to_be_disabled()
    expect(page.locator("input[name=acknowledge_unknown]")).to_have_count(0)

    page.goto(f"{base}/deployments/{deployment.pk}/change/restart/")
    expect(card.locator("#unknown-facts")).to_contain_text("may go ahead once you tick")
    page.fill("textarea[name=reason]", "the driver hiccup may clear with a restart")
    page.click("#change-form button[type=submit]")
    # Without the tick, the form says what is missing and keeps what was typed.
    expect(page.locator("#change-form")).to_contain_text("Acknowledge what is unknown explicitly")
    expect(page.locator("textarea[name=reason]")).to_have_value(
        "the driver hiccup may clear with a restart"
    )
    assert not ChangeRequest.objects.exists()
    screenshot(page, "12-partial-acknowledge")

    page.check("input[name=acknowledge_unknown]")
    fleet.set_fault("gpu-01", "gpu_driver_error", on=False)  # the restart is the remedy
    page.click("#change-form button[type=submit]")
    page.wait_for_url(re.compile(rf"^{re.escape(base)}/changes/\d+/$"))
    expect(page.locator("#change-status")).to_have_text("succeeded", timeout=60_000)
    change = ChangeRequest.objects.get()
    assert change.rests_on_partial and change.params["acknowledged_unknown"]
    expect(page.locator("section", has_text="Audit events")).to_contain_text(
        "change.unknown_acknowledged"
    )


def test_a_rollback_from_the_browser_writes_the_unit_back_byte_for_byte(
    make_fleet, celery_worker, live_server, operator, approver, page, new_page
):
    fleet = register(make_fleet(1, unit_styles={"gpu-01": "envfile"}))
    host = fleet.host("gpu-01")
    probe(host)
    original = fleet.state("gpu-01")["unit_files"][UNIT_PATH]["content"]
    assert "Environment=" in original and "EnvironmentFile=" in original
    deployment = Deployment.objects.get(host=host)
    swap = services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap", snapshot=probe(host),
        reason="INT4 is faster", model=ModelArtifact.objects.get(path__endswith="K2.5-INT4"),
    )  # fmt: skip
    services.change_request_approve(
        change=swap, approver=approver, snapshot=probe(host), reason="fits; host idle"
    )
    # here or by the test's worker, which the approval queued it to: whichever claims it first
    runner.change_execute(change_id=swap.pk)
    swap = wait_for_change(swap)
    assert swap.status == ChangeStatus.SUCCEEDED, swap.status_reason
    assert fleet.state("gpu-01")["unit_files"][UNIT_PATH]["content"] != original
    probe(host)
    base = live_server.url

    login(page, base, operator.username)
    page.goto(f"{base}/hosts/gpu-01/")
    page.locator(f"#deployment-{deployment.pk}").get_by_role("link", name="Roll back").click()
    page.wait_for_url(f"{base}/deployments/{deployment.pk}/change/rollback/")
    page.fill("textarea[name=reason]", "compare against NVFP4 again")
    page.click("#change-form button[type=submit]")
    page.wait_for_url(re.compile(rf"^{re.escape(base)}/changes/\d+/$"))
    rollback = ChangeRequest.objects.get(kind="rollback")
    expect(page.locator("#change-status")).to_have_text("waiting for approval")

    other = new_page()
    login(other, base, approver.username)
    other.goto(f"{base}/changes/{rollback.pk}/")
    panel = other.locator("#approval-panel")
    panel.get_by_placeholder("why you approve (required)").fill("back to the adopted unit")
    panel.get_by_role("button", name="Approve").click()
    expect(other.locator("#change-status")).to_have_text("succeeded", timeout=60_000)
    assert fleet.state("gpu-01")["unit_files"][UNIT_PATH]["content"] == original
