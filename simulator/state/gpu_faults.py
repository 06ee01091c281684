"""What the GPU faults do to a host: each effect a small function of the machine and the time.

A fault hits one GPU, the same one on every host (on a host with fewer GPUs, that index modulo
its count), from the moment it is switched on: counters that grow do so from then, in the host's
simulated minutes. Row remapping exists only on HBM boards and NVLink only on NVLink boards;
elsewhere those faults change nothing. Switching a fault on writes its Xid line to the kernel
log (`kernel_log`); switching it off does not take the line back (it happened this boot).

`engine_core_died` is vLLM issue 39863: the engine core and its GPU workers die while the API
server lives on. It kills the engines of the runs serving when it is switched on (a restart
brings up a healthy engine); switching it off revives them, as a convenience of the simulator.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from . import kernel_log

if TYPE_CHECKING:
    from .gpus import GpuReading
    from .machine import Machine
    from .units import Run

GPU_FAULTS = (
    "gpu_fell_off_bus",
    "ecc_uncorrectable",
    "row_remap_pending",
    "row_remap_failure",
    "nvlink_errors",
    "nvlink_down",
    "pcie_downtrained",
    "hw_slowdown",
    "persistence_off",
    "engine_core_died",
)
# The GPU each fault hits on an eight-GPU host.
FAULT_GPU = {
    "gpu_fell_off_bus": 3,
    "ecc_uncorrectable": 2,
    "row_remap_pending": 5,
    "row_remap_failure": 5,
    "nvlink_errors": 1,
    "nvlink_down": 1,
    "pcie_downtrained": 6,
    "hw_slowdown": 4,
}
FAULT_LINK = 4  # the NVLink that nvlink_errors and nvlink_down hit
NVLINK_ERRORS_PER_MINUTE = 3  # replay and CRC errors, each
CORRECTED_ECC_PER_MINUTE = 1
UNCORRECTED_ECC = 2
DOWNTRAINED_WIDTH, DOWNTRAINED_GEN = 8, 3
HW_SLOWDOWN, HW_THERMAL_SLOWDOWN = 0x8, 0x40
WAITING_EVERY_SECONDS = 10.0  # engine_core_died: one more request waits every 10 s
_READING_FAULTS = frozenset(
    {
        "gpu_fell_off_bus",
        "ecc_uncorrectable",
        "row_remap_pending",
        "row_remap_failure",
        "pcie_downtrained",
        "hw_slowdown",
        "persistence_off",
    }
)


@dataclass(frozen=True)
class LinkState:
    """One NVLink as `nvidia-smi nvlink -s` and `-e` show it."""

    link: int
    active: bool
    replay: int = 0
    recovery: int = 0
    crc: int = 0


def faulted_gpu(machine: Machine, fault: str) -> int:
    return FAULT_GPU[fault] % machine.hardware.gpu_count


def applies(machine: Machine, fault: str) -> bool:
    """Whether the fault means anything on this host's hardware."""
    hardware = machine.hardware
    if fault in ("row_remap_pending", "row_remap_failure"):
        return hardware.row_remapping
    if fault in ("nvlink_errors", "nvlink_down"):
        return hardware.has_nvlink
    return True


def hits(machine: Machine, fault: str, index: int) -> bool:
    """Whether `fault` is on and hits GPU `index`."""
    on = fault in machine.faults and applies(machine, fault)
    return on and faulted_gpu(machine, fault) == index


def minutes_on(machine: Machine, fault: str, now: float) -> float:
    """Simulated minutes since the fault was switched on."""
    return max(0.0, now - machine.fault_since.get(fault, now)) / 60.0


def lost_gpus(machine: Machine) -> set[int]:
    """The GPUs nvidia-smi cannot reach."""
    if "gpu_fell_off_bus" not in machine.faults:
        return set()
    return {faulted_gpu(machine, "gpu_fell_off_bus")}


# --- the readings --------------------------------------------------------------------------


def apply(machine: Machine, readings: list[GpuReading], now: float) -> list[GpuReading]:
    """The readings as the faults leave them (the same list when no GPU fault is on)."""
    if not machine.faults & _READING_FAULTS:
        return readings
    return [_faulted(machine, r, now) for r in readings]


def _faulted(machine: Machine, r: GpuReading, now: float) -> GpuReading:
    changes: dict[str, object] = {}
    index = r.index
    if "persistence_off" in machine.faults:
        changes["persistence"] = False
    if hits(machine, "gpu_fell_off_bus", index):
        changes["lost"] = True
    if hits(machine, "ecc_uncorrectable", index):
        minutes = minutes_on(machine, "ecc_uncorrectable", now)
        changes["ecc_uncorrected"] = UNCORRECTED_ECC
        changes["ecc_corrected"] = int(minutes * CORRECTED_ECC_PER_MINUTE)
    if r.remapped_rows is not None:
        changes.update(_remapped(machine, r))
    if hits(machine, "pcie_downtrained", index):
        changes["pcie_width"] = DOWNTRAINED_WIDTH
        changes["pcie_gen"] = min(r.pcie_gen, DOWNTRAINED_GEN)
    if hits(machine, "hw_slowdown", index):
        changes["clock_event_reasons"] = r.clock_event_reasons | HW_SLOWDOWN | HW_THERMAL_SLOWDOWN
        changes["clock_sm_mhz"] = r.clock_sm_mhz // 2
    return replace(r, **changes) if changes else r  # type: ignore[arg-type]


def _remapped(machine: Machine, r: GpuReading) -> dict[str, object]:
    pending = hits(machine, "row_remap_pending", r.index)
    failure = hits(machine, "row_remap_failure", r.index)
    if not (pending or failure):
        return {}
    correctable, uncorrectable, _pending, _failure = r.remapped_rows or (0, 0, 0, 0)
    if pending:
        uncorrectable += 1
    return {"remapped_rows": (correctable, uncorrectable, int(pending), int(failure))}


# --- NVLink --------------------------------------------------------------------------------


def nvlinks(machine: Machine, index: int, now: float) -> list[LinkState]:
    """GPU `index`'s NVLinks (none on a PCIe board)."""
    links = []
    for link in range(machine.hardware.nvlink_links):
        down = link == FAULT_LINK and hits(machine, "nvlink_down", index)
        errors = 0
        if link == FAULT_LINK and hits(machine, "nvlink_errors", index):
            errors = int(minutes_on(machine, "nvlink_errors", now) * NVLINK_ERRORS_PER_MINUTE)
        links.append(LinkState(link, active=not down, replay=errors, crc=errors))
    return links


def active_links(machine: Machine, index: int) -> int:
    """How many of GPU `index`'s NVLinks are up (what `topo -m` counts as NV#)."""
    down = machine.hardware.nvlink_links > FAULT_LINK and hits(machine, "nvlink_down", index)
    return machine.hardware.nvlink_links - (1 if down else 0)


# --- the engine ----------------------------------------------------------------------------


def core_dead(run: Run) -> bool:
    """Whether this run's engine core and GPU workers died under its API server."""
    return run.core_died_at is not None


def waiting_requests(run: Run, now: float) -> int:
    """Requests queued at a dead engine since it died (one more every ten seconds)."""
    if run.core_died_at is None:
        return 0
    return int(max(0.0, now - run.core_died_at) / WAITING_EVERY_SECONDS)


def _kill_cores(machine: Machine, now: float) -> None:
    for unit in machine.units.values():
        run = unit.run
        alive = run is not None and run.engine is not None and run.core_died_at is None
        if alive and run is not None and run.ready(now):
            run.core_died_at = now


def _revive_cores(machine: Machine) -> None:
    for unit in machine.units.values():
        if unit.run is not None:
            unit.run.core_died_at = None


# --- switching -----------------------------------------------------------------------------


def switched(machine: Machine, fault: str, was_on: bool, on: bool) -> None:
    """What happens as a GPU fault goes on (its start time, its Xid line) or off."""
    if fault not in GPU_FAULTS:
        return
    now = machine.tick()
    if on and not was_on:
        machine.fault_since[fault] = now
        if fault == "engine_core_died":
            _kill_cores(machine, now)
        if fault in kernel_log.XIDS and applies(machine, fault):
            index = faulted_gpu(machine, fault)
            pid = next((a.pid for a in machine.compute_apps() if a.gpu_index == index), None)
            bus = machine.hardware.bus_id(index)
            kernel_log.append(machine, kernel_log.xid_message(fault, bus, pid), machine.wall())
    elif not on:
        machine.fault_since.pop(fault, None)
        if fault == "engine_core_died":
            _revive_cores(machine)
