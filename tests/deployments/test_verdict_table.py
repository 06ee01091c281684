"""The verdict table (deployments.verdict_table): one case per row, each a host with exactly
that fault, whose verdict must carry the row's code at the row's level and name its GPU or unit.
Removing a row, or changing its level, fails its case; a row without a case fails too."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import pytest

from deployments import health
from deployments.verdict_table import DEGRADED, FAILED, ROWS, TABLE
from hosts.state import HostState
from tests import factories as f

from .test_health import NOW, evidence, verdict_of, with_server

# The docs page that holds the table (README.md before the docs site).
VERDICTS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "verdicts.md"


def details(index: int = 0, **fields: Any) -> dict[str, Any]:
    row = {
        "index": index, "persistence_mode": True, "ecc_corrected_volatile": 0,
        "ecc_uncorrected_volatile": 0, "clock_sm_mhz": 2520, "clock_max_sm_mhz": 3090,
        "clock_event_reasons": 0, "pcie_gen_current": 5, "pcie_gen_max": 5,
        "pcie_width_current": 16, "pcie_width_max": 16,
    }  # fmt: skip
    return {**row, **fields}


def state(**fields: Any) -> dict[str, Any]:
    parsed = f.parsed_state()
    parsed["gpu_details"] = [details(i) for i in range(8)]
    parsed.update(fields)
    return parsed


def with_gpu_details(index: int, **fields: Any) -> dict[str, Any]:
    return state(gpu_details=[details(i, **(fields if i == index else {})) for i in range(8)])


def xid(code: int, message: str = "pid=0, name=python3, Ch 00000008") -> dict[str, Any]:
    event = {"code": code, "pci": "0000:5d:00", "gpu_index": 3, "message": message,
             "at": "2026-12-01T11:58:00+00:00"}  # fmt: skip
    return state(xid_events=[event])


def nvlinks(errors: int = 0, inactive: int | None = None) -> list[dict[str, Any]]:
    links = [
        {"link": n, "active": n != inactive, "speed_gbps": 26.562, "replay_errors": errors,
         "recovery_errors": 0, "crc_errors": 0}
        for n in range(18)
    ]  # fmt: skip
    return [{"index": 1, "uuid": "GPU-00000001", "links": links}]


def with_previous(parsed: dict[str, Any], before: dict[str, Any]) -> health.HostEvidence:
    ev = evidence(parsed)
    previous = health.SnapshotFacts(
        pk=6, status="ok", taken_at=NOW - dt.timedelta(seconds=70), error="",
        state=HostState.from_json(before),
    )  # fmt: skip
    return health.HostEvidence(**{**ev.__dict__, "previous": previous})


def stalled() -> dict[str, Any]:
    parsed = with_server(requests_running=0.0, requests_waiting=12.0)
    parsed["deployments"][f.UNIT]["server"]["generation_tokens_total"] = 51200.0
    return parsed


def engine_gone() -> dict[str, Any]:
    parsed = f.parsed_state(used_mib=3)
    parsed["compute_apps"] = [
        {"pid": 5000, "process_name": "python3", "used_memory_mib": 3, "unit": "session-2.scope"}
    ]
    return parsed


def port_refused() -> health.HostEvidence:
    parsed = with_server(
        healthy=False,
        health_http_status=None,
        health_error="curl: (7) Failed to connect to 127.0.0.1 port 8000",
    )
    parsed["host_time"] = int(dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC).timestamp())
    return evidence(parsed)


def lost_gpu() -> health.HostEvidence:
    lost = {"message": "GPU is lost.  Reboot the system to recover this GPU",
            "pci_bus_id": "00000000:5D:00.0", "index": 3}  # fmt: skip
    return evidence(state(lost_gpus=[lost]))


def gpu_errors(**fields: Any) -> health.HostEvidence:
    index = fields.pop("index")
    return evidence(state(gpu_errors=[{"index": index, **fields}]))


def persistence_off() -> health.HostEvidence:
    return evidence(state(gpu_details=[details(i, persistence_mode=False) for i in range(8)]))


# code -> (the host with that fault, the level the verdict gives it, words its reason carries);
# the levels are written here, not read from the table, so changing one fails its case.
def diagnosed(status: str) -> health.HostEvidence:
    """A host whose newest DCGM diagnostic (an hour old) judged one test `status` on GPU 5."""
    tests = [
        {"category": "Deployment", "name": "Denylist", "status": "pass", "gpus": [0, 1]},
        {"category": "Deployment", "name": "Page Retirement/Row Remap", "status": status,
         "gpus": [5], "warnings": ["GPU 5 has pending or failed row remappings"]},
    ]  # fmt: skip
    parsed = state(gpu_diagnostic={"level": 1, "version": "3.3.9", "tests": tests})
    ev = evidence()
    facts = health.SnapshotFacts(
        pk=4, status="ok", taken_at=NOW - dt.timedelta(hours=1), error="",
        state=HostState.from_json(parsed),
    )  # fmt: skip
    return health.HostEvidence(**{**ev.__dict__, "gpu_diagnostic": facts})


RESET = "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"

# code -> (the host with that fault, words its reason must carry)
CASES: dict[str, tuple[Any, str | None, str]] = {
    "gpu_lost": (lost_gpu, FAILED, "GPU 3 is lost"),
    "xid_fatal": (
        lambda: evidence(xid(79, "pid=0, GPU has fallen off the bus.")),
        FAILED,
        "GPU 3: Xid 79, GPU has fallen off the bus",
    ),
    "xid_reset_required": (lambda: evidence(xid(154, RESET)), FAILED, "GPU 3: Xid 154"),
    "xid_warning": (lambda: evidence(xid(74)), DEGRADED, "GPU 3: Xid 74, NVLink error"),
    "xid_unknown": (lambda: evidence(xid(171)), DEGRADED, "GPU 3: Xid 171, not in NVIDIA's table"),
    "xid_application": (lambda: evidence(xid(13)), None, ""),
    "ecc_uncorrectable": (
        lambda: evidence(with_gpu_details(2, ecc_uncorrected_volatile=2)),
        FAILED,
        "GPU 2: 2 uncorrectable ECC errors",
    ),
    "ecc_uncorrectable_lifetime": (
        lambda: gpu_errors(index=2, ecc_uncorrected_aggregate=4),
        DEGRADED,
        "GPU 2: 4 uncorrectable ECC errors in its lifetime",
    ),
    "row_remap_failure": (
        lambda: gpu_errors(index=5, remap_failure=True, remap_pending=False),
        FAILED,
        "GPU 5: a row remapping failed",
    ),
    "row_remap_pending": (
        lambda: gpu_errors(index=5, remap_pending=True, remapped_rows_uncorrectable=1),
        DEGRADED,
        "GPU 5: a row remapping waits for a GPU reset",
    ),
    "retired_pages_pending": (
        lambda: gpu_errors(index=0, retired_pages_pending=True),
        DEGRADED,
        "GPU 0: a page retirement",
    ),
    "nvlink_inactive": (
        lambda: evidence(state(nvlinks=nvlinks(inactive=4))),
        DEGRADED,
        "GPU 1: NVLink 4 inactive (17 of 18 up)",
    ),
    "nvlink_errors_rising": (
        lambda: with_previous(state(nvlinks=nvlinks(errors=9)), state(nvlinks=nvlinks(errors=2))),
        DEGRADED,
        "GPU 1: NVLink errors rose",
    ),
    "pcie_width_degraded": (
        lambda: evidence(with_gpu_details(6, pcie_width_current=8)),
        DEGRADED,
        "GPU 6: PCIe link at x8 of x16",
    ),
    "pcie_gen_degraded": (
        lambda: evidence(busy(with_gpu_details(6, pcie_gen_current=3))),
        DEGRADED,
        "GPU 6: PCIe Gen3 of Gen5 while busy",
    ),
    "clock_slowdown": (
        lambda: evidence(with_gpu_details(4, clock_event_reasons=0x48)),
        DEGRADED,
        "GPU 4: clocks held down by HW slowdown, HW thermal slowdown",
    ),
    "persistence_off": (persistence_off, DEGRADED, "persistence mode is off on every GPU"),
    "gpu_diagnostic_failed": (
        lambda: diagnosed("fail"),
        FAILED,
        "DCGM diagnostic level 1 (snapshot #4, 60 min ago): Page Retirement/Row Remap on GPU 5",
    ),
    "gpu_diagnostic_warning": (
        lambda: diagnosed("warn"),
        DEGRADED,
        "DCGM diagnostic level 1 (snapshot #4, 60 min ago) warned: Page Retirement/Row Remap",
    ),
    "engine_dead": (
        lambda: evidence(with_server(healthy=False, health_http_status=503)),
        FAILED,
        "/health answered 503",
    ),
    "engine_gone": (lambda: evidence(engine_gone()), FAILED, "no process of it holds GPU memory"),
    "engine_stalled": (
        lambda: with_previous(stalled(), stalled()),
        FAILED,
        "12 requests waiting, none running, and no token generated",
    ),
    "port_refused": (port_refused, FAILED, "still refuses connections"),
}


def busy(parsed: dict[str, Any]) -> dict[str, Any]:
    for gpu in parsed["gpus"]:
        gpu["utilization_pct"] = 90
    return parsed


def test_every_row_has_a_case_and_every_case_a_row() -> None:
    assert set(CASES) == set(TABLE)


@pytest.mark.parametrize("code", list(CASES))
def test_the_verdict_says_what_its_row_says(code: str) -> None:
    make, level, words = CASES[code]
    result = health.evaluate(make())
    assert TABLE[code].level == level
    found = [r for r in result.reasons if r.code == code]
    if level is None:
        assert found == [] and result.verdict == "healthy", result.reasons
        return
    assert len(found) == 1, result.reasons
    assert found[0].level == level
    assert words in found[0].text
    assert result.verdict == level


def test_a_host_with_none_of_the_faults_is_healthy() -> None:
    parsed = state(nvlinks=nvlinks(), gpu_errors=[{"index": i} for i in range(8)])
    assert verdict_of(with_previous(parsed, parsed)) == ("healthy", set())


def test_nvlink_counters_that_fell_were_reset_not_rising() -> None:
    ev = with_previous(state(nvlinks=nvlinks(errors=1)), state(nvlinks=nvlinks(errors=50)))
    assert verdict_of(ev) == ("healthy", set())


def test_nvlink_counters_without_an_earlier_probe_are_not_weighed() -> None:
    assert verdict_of(evidence(state(nvlinks=nvlinks(errors=9)))) == ("healthy", set())


def test_an_idle_gpu_may_lower_its_pcie_generation() -> None:
    assert verdict_of(evidence(with_gpu_details(6, pcie_gen_current=1))) == ("healthy", set())


def test_a_stall_needs_two_probes_with_no_token_between() -> None:
    moved = stalled()
    moved["deployments"][f.UNIT]["server"]["generation_tokens_total"] = 60000.0
    assert verdict_of(with_previous(stalled(), moved)) == ("healthy", set())
    assert verdict_of(evidence(stalled())) == ("healthy", set())


def test_an_engine_whose_processes_nvidia_smi_cannot_see_is_not_called_gone() -> None:
    parsed = f.parsed_state()  # 96,900 MiB used on each GPU, no process listed
    assert verdict_of(evidence(parsed)) == ("healthy", set())


def test_the_docs_document_every_row() -> None:
    text = VERDICTS_PAGE.read_text()
    section = text.split("## What the verdict says about GPU and engine faults", 1)[1]
    section = section.split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.M))
    assert documented == {row.code for row in ROWS}


def test_a_diagnostic_that_did_not_run_is_shown_not_weighed() -> None:
    ev = diagnosed("pass")
    assert verdict_of(ev) == ("healthy", set())
    assert ev.gpu_diagnostic is not None
    ev.gpu_diagnostic.state.gpu_diagnostic.error = "DCGM is not installed on this host (no dcgmi)"
    ev.gpu_diagnostic.state.gpu_diagnostic.tests = []
    assert verdict_of(ev) == ("healthy", set())
