"""The readers of the probe's GPU fault sections (see hosts.probe_sections): each fills its
part of the HostState, matching what it read to the GPUs the `gpus` section listed."""

from __future__ import annotations

import dataclasses

from .. import probe_sections as catalog
from ..state import HostState
from ..state_gpu import GpuErrors, GpuNvLinks, NvLink
from .collector import Collector
from .gpu_faults import (
    parse_gpu_errors,
    parse_lost_gpus,
    parse_nvlink_errors,
    parse_nvlink_status,
    parse_remapped_rows,
    parse_xid_journal,
    pci_key,
)
from .nvidia_read import read_section, read_smi


def read_lost_gpus(out: Collector, state: HostState) -> None:
    """GPUs the `gpus` query could not reach. nvidia-smi numbers GPUs in PCI order and leaves
    a lost one out, so when the gaps in the numbers match the lost GPUs one for one, each is
    named by its gap."""
    section = out.sections.get(catalog.GPUS.name)
    if section is None:
        return
    lost = parse_lost_gpus(section.output)
    seen = {g.index for g in state.gpus}
    gaps = [i for i in range(len(seen) + len(lost)) if i not in seen]
    unnamed = [gpu for gpu in lost if gpu.index is None]
    if len(gaps) == len(unnamed):
        for gpu, index in zip(unnamed, gaps, strict=True):
            gpu.index = index
    state.lost_gpus = lost


def read_gpu_errors(out: Collector, state: HostState) -> None:
    state.gpu_errors = read_smi(out, catalog.GPU_ERRORS.name, parse_gpu_errors, benign_exit=6)


def read_remapped_rows(out: Collector, state: HostState) -> None:
    """Merged into each GPU's GpuErrors, found by its UUID."""
    rows = read_smi(out, catalog.REMAPPED_ROWS.name, parse_remapped_rows, benign_exit=6)
    index_of = state.gpu_index_by_uuid()
    by_index = {e.index: e for e in state.gpu_errors}
    for row in rows:
        index = index_of.get(row.uuid or "")
        if index is None:
            continue
        # a new GpuErrors: the one read from `gpu_errors` may be the previous probe's too
        # (hosts.parsers.reuse), and a later read of that section must not see these rows
        by_index[index] = dataclasses.replace(
            by_index.get(index) or GpuErrors(index=index),
            uuid=row.uuid,
            remapped_rows_correctable=row.remapped_rows_correctable,
            remapped_rows_uncorrectable=row.remapped_rows_uncorrectable,
            remap_pending=row.remap_pending,
            remap_failure=row.remap_failure,
        )
    state.gpu_errors = sorted(by_index.values(), key=lambda e: e.index)


def read_nvlink_status(out: Collector, state: HostState) -> None:
    links = read_section(out, catalog.NVLINK_STATUS.name, parse_nvlink_status, "nvidia-smi")
    state.nvlinks = links or []


def read_nvlink_errors(out: Collector, state: HostState) -> None:
    """The counters, onto the links `nvlink_status` listed (or new ones, if it failed)."""
    counters = read_section(out, catalog.NVLINK_ERRORS.name, parse_nvlink_errors, "nvidia-smi")
    gpus = {g.index: g for g in state.nvlinks}
    for index, links in (counters or {}).items():
        # new objects for what the counters fill in: the links read from `nvlink_status` may
        # be the previous probe's too (hosts.parsers.reuse)
        found = gpus.get(index)
        gpu = gpus[index] = (
            dataclasses.replace(found, links=[dataclasses.replace(ln) for ln in found.links])
            if found
            else GpuNvLinks(index=index)
        )
        by_link = {link.link: link for link in gpu.links}
        for number, values in links.items():
            link = by_link.get(number)
            if link is None:
                link = by_link[number] = NvLink(link=number)
                gpu.links.append(link)
            for attr, value in values.items():
                setattr(link, attr, value)
    state.nvlinks = sorted(gpus.values(), key=lambda g: g.index)


def read_xid_events(out: Collector, state: HostState) -> None:
    section = out.take(catalog.XID_EVENTS.name)
    if section is None:
        return
    before = len(out.problems)
    events = out.attempt(section.name, lambda: parse_xid_journal(section.output)) or []
    # journalctl exits 1 when --grep matched nothing on some versions: not a failure.
    if not (section.exit_status == 1 and not section.output.strip()):
        out.check_exit(section, "journalctl", before)
    known: list[tuple[str | None, int | None]] = [(e.pci_bus_id, e.index) for e in state.gpu_errors]
    known += [(g.pci_bus_id, g.index) for g in state.lost_gpus]
    index_of = {pci_key(bus): index for bus, index in known if bus and index is not None}
    for event in events:
        event.gpu_index = index_of.get(event.pci)
    state.xid_events = events
