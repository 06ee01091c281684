"""The GPU fault facts of each host's newest snapshot as Prometheus gauges (the collector's
per-host families): what an alert on a falling GPU, a remap or an erring NVLink reads."""

from __future__ import annotations

from collections import Counter

from prometheus_client.core import GaugeMetricFamily

from hosts.state import HostState

GPU = ["host", "gpu"]

# (name, help, labels), in the order they are exposed.
GPU_FAULT_FAMILIES: tuple[tuple[str, str, list[str]], ...] = (
    (
        "gpu_ecc_uncorrected_volatile_errors",
        "Uncorrectable ECC errors since the driver loaded (nvidia-smi).",
        GPU,
    ),
    (
        "gpu_ecc_uncorrected_aggregate_errors",
        "Uncorrectable ECC errors over the board's lifetime.",
        GPU,
    ),
    ("gpu_remapped_rows_pending", "1 if a memory row waits for a GPU reset to be remapped.", GPU),
    ("gpu_remapped_rows_failure", "1 if a row remapping failed (bad memory).", GPU),
    ("gpu_pcie_link_width", "PCIe lanes the link runs at.", GPU),
    ("gpu_pcie_link_width_max", "PCIe lanes the link can run at.", GPU),
    ("gpu_pcie_link_generation", "PCIe generation the link runs at.", GPU),
    ("gpu_pcie_link_generation_max", "PCIe generation the link can run at.", GPU),
    (
        "gpu_clock_event_reasons",
        "NVML's clock event reason bitmask (HW slowdown 0x8, SW "
        "thermal 0x20, HW thermal 0x40, HW power brake 0x80).",
        GPU,
    ),
    ("gpu_persistence_mode", "1 if persistence mode is on.", GPU),
    ("gpu_nvlink_links_inactive", "NVLink links of the GPU that are inactive.", GPU),
    (
        "gpu_nvlink_errors",
        "NVLink error counters summed over the GPU's links, since the driver loaded.",
        [*GPU, "counter"],
    ),
    ("gpu_xid_events", "Xid events of this boot in the kernel log, per Xid.", [*GPU, "xid"]),
    ("gpu_lost", "1 per GPU nvidia-smi could not reach (gpu: its index, or its PCI bus id).", GPU),
)


def gpu_fault_family_set(gauge: type[GaugeMetricFamily]) -> dict[str, GaugeMetricFamily]:
    return {
        name: gauge(f"controlplane_{name}", text, labels=labels)
        for name, text, labels in GPU_FAULT_FAMILIES
    }


def add_gpu_faults(families: dict[str, GaugeMetricFamily], host: str, state: HostState) -> None:
    def put(name: str, gpu: int | str | None, value: float | int | None, *extra: str) -> None:
        if value is not None and gpu is not None:
            families[name].add_metric([host, str(gpu), *extra], float(value))

    for d in state.gpu_details:
        put("gpu_ecc_uncorrected_volatile_errors", d.index, d.ecc_uncorrected_volatile)
        put("gpu_pcie_link_width", d.index, d.pcie_width_current)
        put("gpu_pcie_link_width_max", d.index, d.pcie_width_max)
        put("gpu_pcie_link_generation", d.index, d.pcie_gen_current)
        put("gpu_pcie_link_generation_max", d.index, d.pcie_gen_max)
        put("gpu_clock_event_reasons", d.index, d.clock_event_reasons)
        mode = d.persistence_mode
        put("gpu_persistence_mode", d.index, None if mode is None else int(mode))
    for e in state.gpu_errors:
        put("gpu_ecc_uncorrected_aggregate_errors", e.index, e.ecc_uncorrected_aggregate)
        for name, flag in (("pending", e.remap_pending), ("failure", e.remap_failure)):
            put(f"gpu_remapped_rows_{name}", e.index, None if flag is None else int(flag))
    for gpu in state.nvlinks:
        put("gpu_nvlink_links_inactive", gpu.index, len(gpu.inactive))
        for counter in ("replay", "recovery", "crc"):
            values = [getattr(link, f"{counter}_errors") for link in gpu.links]
            known = [v for v in values if v is not None]
            put("gpu_nvlink_errors", gpu.index, sum(known) if known else None, counter)
    xids = Counter(
        (e.gpu_index if e.gpu_index is not None else e.pci, e.code) for e in state.xid_events
    )
    for (where, code), count in sorted(xids.items(), key=str):
        put("gpu_xid_events", where, count, str(code))
    for lost in state.lost_gpus:
        put("gpu_lost", lost.index if lost.index is not None else lost.pci_bus_id, 1)
