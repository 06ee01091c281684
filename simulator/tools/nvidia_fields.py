"""nvidia-smi --query-gpu and --query-compute-apps fields: each one's CSV header and value.

The names, headers, units and `[N/A]` values are nvidia-smi's (driver 580) for the RTX PRO 6000
Blackwell Server Edition: persistence mode on, ECC on with no errors, PCIe Gen5 x16 that trains
down to Gen1 at idle, and the clock event reasons as NVML's hex bitmask.
"""

from __future__ import annotations

from collections.abc import Callable

from ..state import DRIVER_VERSION, GPU_COUNT, GpuReading
from ..state.gpus import CLOCK_MAX_MEM_MHZ, CLOCK_MAX_SM_MHZ, PCIE_MAX_GEN, PCIE_WIDTH

_Field = tuple[str, Callable[[GpuReading, bool], str]]


def _mhz(value: int, nounits: bool) -> str:
    return str(value) if nounits else f"{value} MHz"


# The fields an engineer reads in `nvidia-smi -q`; the clock and throttle names have aliases.
DETAIL_FIELDS: dict[str, _Field] = {
    "persistence_mode": ("persistence_mode", lambda r, nu: "Enabled"),
    "ecc.mode.current": ("ecc.mode.current", lambda r, nu: "Enabled"),
    "ecc.errors.corrected.volatile.total": (
        "ecc.errors.corrected.volatile.total",
        lambda r, nu: "0",
    ),
    "ecc.errors.uncorrected.volatile.total": (
        "ecc.errors.uncorrected.volatile.total",
        lambda r, nu: "0",
    ),
    "clocks.sm": ("clocks.current.sm [MHz]", lambda r, nu: _mhz(r.clock_sm_mhz, nu)),
    "clocks.current.sm": ("clocks.current.sm [MHz]", lambda r, nu: _mhz(r.clock_sm_mhz, nu)),
    "clocks.mem": ("clocks.current.memory [MHz]", lambda r, nu: _mhz(r.clock_mem_mhz, nu)),
    "clocks.current.memory": (
        "clocks.current.memory [MHz]",
        lambda r, nu: _mhz(r.clock_mem_mhz, nu),
    ),
    "clocks.max.sm": ("clocks.max.sm [MHz]", lambda r, nu: _mhz(CLOCK_MAX_SM_MHZ, nu)),
    "clocks.max.memory": ("clocks.max.memory [MHz]", lambda r, nu: _mhz(CLOCK_MAX_MEM_MHZ, nu)),
    "clocks_event_reasons.active": (
        "clocks_event_reasons.active",
        lambda r, nu: f"0x{r.clock_event_reasons:016X}",
    ),
    "clocks_throttle_reasons.active": (
        "clocks_throttle_reasons.active",
        lambda r, nu: f"0x{r.clock_event_reasons:016X}",
    ),
    "pcie.link.gen.current": ("pcie.link.gen.current", lambda r, nu: str(r.pcie_gen)),
    "pcie.link.gen.gpucurrent": ("pcie.link.gen.gpucurrent", lambda r, nu: str(r.pcie_gen)),
    "pcie.link.gen.max": ("pcie.link.gen.max", lambda r, nu: str(PCIE_MAX_GEN)),
    "pcie.link.gen.gpumax": ("pcie.link.gen.gpumax", lambda r, nu: str(PCIE_MAX_GEN)),
    "pcie.link.width.current": ("pcie.link.width.current", lambda r, nu: str(PCIE_WIDTH)),
    "pcie.link.width.max": ("pcie.link.width.max", lambda r, nu: str(PCIE_WIDTH)),
}


def bus_id(index: int) -> str:
    return f"00000000:{[0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB][index % 8]:02X}:00.0"


def _with_unit(value: str, suffix: str, nounits: bool) -> str:
    return value if nounits else f"{value} {suffix}"


# --query-gpu's fields: name -> (CSV header, the value from a reading given `nounits`).
GPU_FIELDS: dict[str, tuple[str, Callable[[GpuReading, bool], str]]] = {
    "index": ("index", lambda r, nu: str(r.index)),
    "uuid": ("uuid", lambda r, nu: r.uuid),
    "gpu_uuid": ("uuid", lambda r, nu: r.uuid),
    "name": ("name", lambda r, nu: r.name),
    "gpu_name": ("name", lambda r, nu: r.name),
    "count": ("count", lambda r, nu: str(GPU_COUNT)),
    "driver_version": ("driver_version", lambda r, nu: DRIVER_VERSION),
    "pci.bus_id": ("pci.bus_id", lambda r, nu: bus_id(r.index)),
    "gpu_bus_id": ("pci.bus_id", lambda r, nu: bus_id(r.index)),
    "pstate": ("pstate", lambda r, nu: r.pstate),
    "fan.speed": ("fan.speed [%]", lambda r, nu: "[N/A]"),
    "memory.total": (
        "memory.total [MiB]",
        lambda r, nu: _with_unit(str(r.memory_total_mib), "MiB", nu),
    ),
    "memory.used": (
        "memory.used [MiB]",
        lambda r, nu: _with_unit(str(r.memory_used_mib), "MiB", nu),
    ),
    "memory.free": (
        "memory.free [MiB]",
        lambda r, nu: _with_unit(
            str(max(0, r.memory_total_mib - r.memory_used_mib - 335)), "MiB", nu
        ),
    ),
    "power.draw": ("power.draw [W]", lambda r, nu: _with_unit(f"{r.power_draw_w:.2f}", "W", nu)),
    "power.limit": (
        "power.limit [W]",
        lambda r, nu: _with_unit(f"{r.power_limit_w:.2f}", "W", nu),
    ),
    "utilization.gpu": (
        "utilization.gpu [%]",
        lambda r, nu: _with_unit(str(r.utilization_pct), "%", nu),
    ),
    "utilization.memory": (
        "utilization.memory [%]",
        lambda r, nu: _with_unit(str(r.utilization_pct // 3), "%", nu),
    ),
    "temperature.gpu": ("temperature.gpu", lambda r, nu: str(r.temperature_c)),
    **DETAIL_FIELDS,
}
# --query-compute-apps's fields: name -> CSV header.
APP_FIELDS = {
    "pid": "pid",
    "process_name": "process_name",
    "name": "process_name",
    "used_memory": "used_gpu_memory [MiB]",
    "used_gpu_memory": "used_gpu_memory [MiB]",
    "gpu_uuid": "gpu_uuid",
    "gpu_bus_id": "gpu_bus_id",
    "gpu_name": "gpu_name",
}
