"""nvidia-smi's --query-gpu, --query-compute-apps and --query-remapped-rows fields: each one's
CSV header and value.

The names, headers, units and `[N/A]` values are nvidia-smi's (driver 580). For the default
RTX PRO 6000 Blackwell Server Edition: persistence mode on, ECC on with no errors, PCIe Gen5 x16
that trains down to Gen1 at idle, and the clock event reasons as NVML's hex bitmask. Other
boards' limits come from the host's hardware profile. Every profile is Ampere or later, which
remap rows instead of retiring pages: the retired_pages fields read `[N/A]`; so do the ECC
counters where ECC is disabled, utilization under MIG, and the row remapper on GDDR boards.
"""

from __future__ import annotations

from collections.abc import Callable

from ..state import DRIVER_VERSION, GpuReading

_Field = tuple[str, Callable[[GpuReading, bool], str]]
NA = "[N/A]"


def _mhz(value: int, nounits: bool) -> str:
    return str(value) if nounits else f"{value} MHz"


def _ecc_corrected(r: GpuReading, nu: bool) -> str:
    return str(r.ecc_corrected) if r.hardware.ecc else NA


def _ecc_uncorrected(r: GpuReading, nu: bool) -> str:
    return str(r.ecc_uncorrected) if r.hardware.ecc else NA


def _utilization(value: int, nounits: bool, r: GpuReading) -> str:
    if r.hardware.mig_enabled:
        return NA  # per MIG device, not per GPU
    return str(value) if nounits else f"{value} %"


# The fields an engineer reads in `nvidia-smi -q`; the clock and throttle names have aliases.
DETAIL_FIELDS: dict[str, _Field] = {
    "persistence_mode": (
        "persistence_mode",
        lambda r, nu: "Enabled" if r.persistence else "Disabled",
    ),
    "ecc.mode.current": (
        "ecc.mode.current",
        lambda r, nu: "Enabled" if r.hardware.ecc else "Disabled",
    ),
    "ecc.errors.corrected.volatile.total": ("ecc.errors.corrected.volatile.total", _ecc_corrected),
    "ecc.errors.uncorrected.volatile.total": (
        "ecc.errors.uncorrected.volatile.total",
        _ecc_uncorrected,
    ),
    "ecc.errors.corrected.aggregate.total": (
        "ecc.errors.corrected.aggregate.total",
        _ecc_corrected,
    ),
    "ecc.errors.uncorrected.aggregate.total": (
        "ecc.errors.uncorrected.aggregate.total",
        _ecc_uncorrected,
    ),
    "retired_pages.pending": ("retired_pages.pending", lambda r, nu: NA),
    "retired_pages.double_bit.count": ("retired_pages.double_bit.count", lambda r, nu: NA),
    "retired_pages.single_bit_ecc.count": (
        "retired_pages.single_bit_ecc.count",
        lambda r, nu: NA,
    ),
    "mig.mode.current": ("mig.mode.current", lambda r, nu: r.hardware.mig_mode or NA),
    "clocks.sm": ("clocks.current.sm [MHz]", lambda r, nu: _mhz(r.clock_sm_mhz, nu)),
    "clocks.current.sm": ("clocks.current.sm [MHz]", lambda r, nu: _mhz(r.clock_sm_mhz, nu)),
    "clocks.mem": ("clocks.current.memory [MHz]", lambda r, nu: _mhz(r.clock_mem_mhz, nu)),
    "clocks.current.memory": (
        "clocks.current.memory [MHz]",
        lambda r, nu: _mhz(r.clock_mem_mhz, nu),
    ),
    "clocks.max.sm": (
        "clocks.max.sm [MHz]",
        lambda r, nu: _mhz(r.hardware.clock_max_sm_mhz, nu),
    ),
    "clocks.max.memory": (
        "clocks.max.memory [MHz]",
        lambda r, nu: _mhz(r.hardware.clock_max_mem_mhz, nu),
    ),
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
    "pcie.link.gen.max": ("pcie.link.gen.max", lambda r, nu: str(r.hardware.pcie_gen_max)),
    "pcie.link.gen.gpumax": (
        "pcie.link.gen.gpumax",
        lambda r, nu: str(r.hardware.pcie_gen_max),
    ),
    "pcie.link.width.current": ("pcie.link.width.current", lambda r, nu: str(r.pcie_width)),
    "pcie.link.width.max": (
        "pcie.link.width.max",
        lambda r, nu: str(r.hardware.pcie_width_max),
    ),
}


def _with_unit(value: str, suffix: str, nounits: bool) -> str:
    return value if nounits else f"{value} {suffix}"


# --query-gpu's fields: name -> (CSV header, the value from a reading given `nounits`).
GPU_FIELDS: dict[str, tuple[str, Callable[[GpuReading, bool], str]]] = {
    "index": ("index", lambda r, nu: str(r.index)),
    "uuid": ("uuid", lambda r, nu: r.uuid),
    "gpu_uuid": ("uuid", lambda r, nu: r.uuid),
    "name": ("name", lambda r, nu: r.name),
    "gpu_name": ("name", lambda r, nu: r.name),
    "count": ("count", lambda r, nu: str(r.hardware.gpu_count)),
    "driver_version": ("driver_version", lambda r, nu: DRIVER_VERSION),
    "pci.bus_id": ("pci.bus_id", lambda r, nu: r.bus_id),
    "gpu_bus_id": ("pci.bus_id", lambda r, nu: r.bus_id),
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
        lambda r, nu: _utilization(r.utilization_pct, nu, r),
    ),
    "utilization.memory": (
        "utilization.memory [%]",
        lambda r, nu: _utilization(r.utilization_pct // 3, nu, r),
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


def _remapped(position: int) -> Callable[[GpuReading], str]:
    return lambda r: NA if r.remapped_rows is None else str(r.remapped_rows[position])


# --query-remapped-rows's fields: name -> (CSV header, the value from a reading). The four
# counts are [N/A] on GDDR boards, which have no row remapper; pending and failure are 0 or 1.
REMAP_FIELDS: dict[str, tuple[str, Callable[[GpuReading], str]]] = {
    "gpu_uuid": ("gpu_uuid", lambda r: r.uuid),
    "gpu_bus_id": ("gpu_bus_id", lambda r: r.bus_id),
    "gpu_name": ("gpu_name", lambda r: r.name),
    "remapped_rows.correctable": ("remapped_rows.correctable", _remapped(0)),
    "remapped_rows.uncorrectable": ("remapped_rows.uncorrectable", _remapped(1)),
    "remapped_rows.pending": ("remapped_rows.pending", _remapped(2)),
    "remapped_rows.failure": ("remapped_rows.failure", _remapped(3)),
}
