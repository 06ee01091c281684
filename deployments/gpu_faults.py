"""The GPU faults of a host's latest snapshot as verdict reasons, each naming its GPU. Pure:
states in, reasons out; the level of each comes from deployments.verdict_table."""

from __future__ import annotations

from collections import defaultdict

from hosts.parsers.nvidia_details import clock_event_reason_names
from hosts.state import HostState
from hosts.state_gpu import DiagnosticTest, GpuDiagnostic, GpuNvLinks
from hosts.xid_catalog import xid_name

from .verdict_table import XID_APPLICATION, XID_FATAL, XID_WARNING, Reason, reason

# Clock event reasons that mean the GPU is held down, not resting or capped by a setting.
SLOWDOWN_MASK = 0x8 | 0x20 | 0x40 | 0x80  # HW, SW thermal, HW thermal, HW power brake
# A link that trains down to save power does so when idle; above this it should be at its max.
BUSY_UTILIZATION_PCT = 50


def gpu_fault_reasons(state: HostState, previous: HostState | None = None) -> list[Reason]:
    found = [
        *_lost(state),
        *_xids(state),
        *_memory(state),
        *_nvlinks(state, previous),
        *_pcie(state),
        *_clocks(state),
        *_persistence(state),
    ]
    return [r for r in found if r is not None]


def needs_previous(state: HostState) -> bool:
    """Whether the NVLink rule needs the snapshot before this one (counters to compare)."""
    return any(gpu.errors for gpu in state.nvlinks)


def _gpu(index: int | None, bus: str | None = None) -> str:
    if index is None:
        return f"GPU {bus}" if bus else "a GPU"
    return f"GPU {index}"


def _lost(state: HostState) -> list[Reason | None]:
    return [
        reason("gpu_lost", f"{_gpu(g.index, g.pci_bus_id)} is lost: {g.message}")
        for g in state.lost_gpus
    ]


def _xid_code(code: int, message: str) -> str:
    if code == 154:
        wants = ("Reset Required", "Reboot Required", "Drain and Reset")
        return "xid_reset_required" if any(w in message for w in wants) else "xid_warning"
    if code in XID_FATAL:
        return "xid_fatal"
    if code in XID_WARNING:
        return "xid_warning"
    return "xid_application" if code in XID_APPLICATION else "xid_unknown"


def _xids(state: HostState) -> list[Reason | None]:
    """One reason per GPU and Xid: how many this boot, and the newest one's words."""
    grouped: dict[tuple[int | None, str, int], list] = defaultdict(list)
    for event in state.xid_events:
        grouped[(event.gpu_index, event.pci, event.code)].append(event)
    reasons = []
    for (index, pci, code), events in grouped.items():
        last = events[-1]
        times = f" ({len(events)} times this boot)" if len(events) > 1 else ""
        when = f" at {last.at}" if last.at else ""
        text = (
            f"{_gpu(index, pci)}: Xid {code}, {xid_name(code)}{when}{times}: {last.message[:120]}"
        )
        reasons.append(reason(_xid_code(code, last.message), text))
    return reasons


def _memory(state: HostState) -> list[Reason | None]:
    reasons = []
    volatile = {d.index: d.ecc_uncorrected_volatile for d in state.gpu_details}
    for d in state.gpu_details:
        if d.ecc_uncorrected_volatile:
            reasons.append(
                reason(
                    "ecc_uncorrectable",
                    f"GPU {d.index}: "
                    f"{d.ecc_uncorrected_volatile} uncorrectable ECC errors "
                    "since the driver loaded",
                )
            )
    for e in state.gpu_errors:
        if e.ecc_uncorrected_aggregate and not volatile.get(e.index):
            reasons.append(
                reason(
                    "ecc_uncorrectable_lifetime",
                    f"GPU {e.index}: "
                    f"{e.ecc_uncorrected_aggregate} uncorrectable ECC errors in "
                    "its lifetime, none since the driver loaded",
                )
            )
        if e.remap_failure:
            reasons.append(
                reason(
                    "row_remap_failure", f"GPU {e.index}: a row remapping failed; its memory is bad"
                )
            )
        elif e.remap_pending:
            rows = e.remapped_rows_uncorrectable
            said = f" ({rows} rows remapped for uncorrectable errors)" if rows else ""
            reasons.append(
                reason(
                    "row_remap_pending",
                    f"GPU {e.index}: a row remapping waits for a GPU reset{said}",
                )
            )
        if e.retired_pages_pending:
            reasons.append(
                reason(
                    "retired_pages_pending",
                    f"GPU {e.index}: a page retirement waits for a GPU reset",
                )
            )
    return reasons


def _nvlinks(state: HostState, previous: HostState | None) -> list[Reason | None]:
    before = {g.index: g for g in previous.nvlinks} if previous is not None else {}
    reasons = []
    for gpu in state.nvlinks:
        if gpu.inactive:
            up = len(gpu.links) - len(gpu.inactive)
            links = ", ".join(str(n) for n in gpu.inactive[:6])
            reasons.append(
                reason(
                    "nvlink_inactive",
                    f"GPU {gpu.index}: NVLink {links} inactive ({up} of {len(gpu.links)} up)",
                )
            )
        rising = _rising(gpu, before.get(gpu.index))
        if rising:
            links = ", ".join(f"link {n} +{d}" for n, d in rising[:4])
            reasons.append(
                reason(
                    "nvlink_errors_rising",
                    f"GPU {gpu.index}: NVLink errors rose since the last probe ({links})",
                )
            )
    return reasons


def _rising(gpu: GpuNvLinks, before: GpuNvLinks | None) -> list[tuple[int, int]]:
    """(link, how many more errors) for each link whose counters grew since `before`. A
    counter lower than before was reset (a driver reload): not rising."""
    if before is None:
        return []
    then = {link.link: link.errors for link in before.links}
    return [
        (link.link, link.errors - then[link.link])
        for link in gpu.links
        if link.link in then and link.errors > then[link.link]
    ]


def _pcie(state: HostState) -> list[Reason | None]:
    busy = {g.index: (g.utilization_pct or 0) >= BUSY_UTILIZATION_PCT for g in state.gpus}
    reasons = []
    for d in state.gpu_details:
        width, width_max = d.pcie_width_current, d.pcie_width_max
        gen, gen_max = d.pcie_gen_current, d.pcie_gen_max
        if width and width_max and width < width_max:
            reasons.append(
                reason(
                    "pcie_width_degraded", f"GPU {d.index}: PCIe link at x{width} of x{width_max}"
                )
            )
        if gen and gen_max and gen < gen_max and busy.get(d.index):
            reasons.append(
                reason(
                    "pcie_gen_degraded", f"GPU {d.index}: PCIe Gen{gen} of Gen{gen_max} while busy"
                )
            )
    return reasons


def _clocks(state: HostState) -> list[Reason | None]:
    reasons = []
    for d in state.gpu_details:
        held = (d.clock_event_reasons or 0) & SLOWDOWN_MASK
        if held:
            names = ", ".join(clock_event_reason_names(held))
            clock = f" (SM at {d.clock_sm_mhz} MHz)" if d.clock_sm_mhz else ""
            reasons.append(
                reason("clock_slowdown", f"GPU {d.index}: clocks held down by {names}{clock}")
            )
    return reasons


def _persistence(state: HostState) -> list[Reason | None]:
    off = [d.index for d in state.gpu_details if d.persistence_mode is False]
    if not off:
        return []
    gpus = "every GPU" if len(off) == len(state.gpu_details) > 1 else _gpu_list(off)
    return [reason("persistence_off", f"persistence mode is off on {gpus}")]


def _gpu_list(indexes: list[int]) -> str:
    return ("GPU " if len(indexes) == 1 else "GPUs ") + ", ".join(str(i) for i in indexes)


def diagnostic_reasons(result: GpuDiagnostic, snapshot_pk: int, age: str) -> list[Reason]:
    """What DCGM's latest diagnostic (snapshot `snapshot_pk`, `age` ago) failed or warned on;
    a diagnostic that did not run (not installed, MIG) is shown, not weighed."""
    said = f"DCGM diagnostic level {result.level} (snapshot #{snapshot_pk}, {age} ago)"
    found = [
        reason("gpu_diagnostic_failed", f"{said}: {_tests(result.failed)}")
        if result.failed
        else None,
        reason("gpu_diagnostic_warning", f"{said} warned: {_tests(result.warned)}")
        if result.warned
        else None,
    ]
    return [r for r in found if r is not None]


def _tests(tests: list[DiagnosticTest]) -> str:
    parts = []
    for test in tests[:3]:
        where = f" on {_gpu_list(test.gpus)}" if test.gpus else ""
        words = f" ({test.warnings[0][:100]})" if test.warnings else ""
        parts.append(f"{test.name}{where}{words}")
    return "; ".join(parts)
