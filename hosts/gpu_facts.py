"""The GPU faults of one snapshot as the host page shows them: beside the GPU each concerns,
in the words an engineer reading nvidia-smi and the kernel log would use."""

from __future__ import annotations

from collections import defaultdict

from .state import HostState
from .xid_catalog import xid_name


def gpu_fault_notes(state: HostState) -> dict[int | None, list[str]]:
    """Per GPU index, what its fault sections say; None gathers what names no known GPU."""
    notes: dict[int | None, list[str]] = defaultdict(list)
    for lost in state.lost_gpus:
        notes[lost.index].append(f"lost ({lost.pci_bus_id or 'bus id unknown'}): {lost.message}")
    for e in state.gpu_errors:
        if e.ecc_uncorrected_aggregate:
            notes[e.index].append(f"{e.ecc_uncorrected_aggregate} uncorrectable ECC (lifetime)")
        if e.remap_failure:
            notes[e.index].append("row remapping failed")
        if e.remap_pending:
            notes[e.index].append("row remapping pending (needs a GPU reset)")
        if e.remapped_rows_uncorrectable:
            notes[e.index].append(f"{e.remapped_rows_uncorrectable} rows remapped (uncorrectable)")
        if e.retired_pages_pending:
            notes[e.index].append("page retirement pending")
    for gpu in state.nvlinks:
        if gpu.inactive:
            links = ", ".join(str(n) for n in gpu.inactive)
            notes[gpu.index].append(f"NVLink {links} inactive of {len(gpu.links)}")
        if gpu.errors:
            notes[gpu.index].append(f"{gpu.errors} NVLink errors since the driver loaded")
    for event in state.xid_events:
        when = f" at {event.at}" if event.at else ""
        notes[event.gpu_index].append(f"Xid {event.code}{when}: {xid_name(event.code)}")
    return dict(notes)


def nvlink_summary(state: HostState) -> str:
    """One line: how many links are up across the GPUs that have NVLink."""
    links = [link for gpu in state.nvlinks for link in gpu.links]
    if not links:
        return ""
    up = sum(1 for link in links if link.active)
    return f"NVLink {up} of {len(links)} links up"
