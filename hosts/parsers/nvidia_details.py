"""What nvidia-smi tells an engineer beyond memory and power: per-GPU details (the second CSV
query), the driver and CUDA versions, and the interconnect topology matrix."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

from ..commands import GPU_DETAIL_FIELDS
from ..state import GpuDetails, Topology
from .common import ParseError, excerpt, first_line, is_unavailable, read_count, read_number
from .nvidia import _smi_fatal, _smi_rows

_NO_DEVICES = "No devices were found"
_INVALID_FIELD_RE = re.compile(r'Field "([^"]+)" is not a valid field to query\.')
_HEX_RE = re.compile(r"0x[0-9a-fA-F]{1,16}")
_PSTATE_RE = re.compile(r"P(?:[0-9]|1[0-5])")
_PERSISTENCE = {"Enabled": True, "Disabled": False}

# NVML's clock event reasons (nvmlClocksEventReason*, formerly ...ThrottleReason*), by bit.
CLOCK_EVENT_REASONS = {
    0x1: "GPU idle",
    0x2: "applications clocks setting",
    0x4: "SW power cap",
    0x8: "HW slowdown",
    0x10: "sync boost",
    0x20: "SW thermal slowdown",
    0x40: "HW thermal slowdown",
    0x80: "HW power brake slowdown",
    0x100: "display clock setting",
}


def clock_event_reason_names(mask: int) -> list[str]:
    """The names of the bits set in a clock event reason mask; unknown bits by their value."""
    names = []
    for bit in range(64):
        value = 1 << bit
        if mask & value:
            names.append(CLOCK_EVENT_REASONS.get(value, f"unknown reason {value:#x}"))
    return names


def _mhz(value: str) -> int | None:
    number = read_number(value, "MHz")
    return None if number is None else round(number)


def _details_row(values: list[str]) -> GpuDetails:
    """One CSV row in the order of commands.GPU_DETAIL_FIELDS."""
    (index, driver, pstate, persistence, ecc_corr, ecc_uncorr, sm, mem, max_sm, reasons) = values[
        :10
    ]
    gen, gen_max, width, width_max = values[10:]
    if pstate and not is_unavailable(pstate) and not _PSTATE_RE.fullmatch(pstate):
        raise ParseError(f"not a performance state: {pstate!r}")
    if not is_unavailable(persistence) and persistence not in _PERSISTENCE:
        raise ParseError(f"persistence mode is not Enabled or Disabled: {persistence!r}")
    mask = None
    if not is_unavailable(reasons):
        if not _HEX_RE.fullmatch(reasons):
            raise ParseError(f"clock event reasons are not a hex mask: {reasons!r}")
        mask = int(reasons, 16)
    gpu_index = read_count(index, "index")
    if gpu_index is None:
        raise ParseError("GPU index unavailable")
    return GpuDetails(
        index=gpu_index,
        driver_version=None if is_unavailable(driver) else driver,
        pstate=None if is_unavailable(pstate) else pstate,
        persistence_mode=_PERSISTENCE.get(persistence),
        ecc_corrected_volatile=read_count(ecc_corr, "corrected ECC errors"),
        ecc_uncorrected_volatile=read_count(ecc_uncorr, "uncorrected ECC errors"),
        clock_sm_mhz=_mhz(sm),
        clock_mem_mhz=_mhz(mem),
        clock_max_sm_mhz=_mhz(max_sm),
        clock_event_reasons=mask,
        clock_event_reason_names=[] if mask is None else clock_event_reason_names(mask),
        pcie_gen_current=read_count(gen, "PCIe generation"),
        pcie_gen_max=read_count(gen_max, "PCIe generation"),
        pcie_width_current=read_count(width, "PCIe link width"),
        pcie_width_max=read_count(width_max, "PCIe link width"),
    )


def parse_gpu_details(text: str, *, problems: list[str] | None = None) -> list[GpuDetails]:
    """Rows of `nvidia-smi --query-gpu=<GPU_DETAIL_FIELDS> --format=csv,noheader`.

    Like `parse_gpu_csv`: driver failures raise with nvidia-smi's own line, `problems` takes
    bad rows so the good GPUs are kept. A driver that does not know a field refuses the whole
    query (`Field "..." is not a valid field to query.`); that raises, naming the field.
    """
    if not text.strip():
        raise ParseError("nvidia-smi printed nothing")
    line = first_line(text)
    if line == _NO_DEVICES and len(text.strip().splitlines()) == 1:
        return []
    invalid = _INVALID_FIELD_RE.fullmatch(line)
    if invalid:
        hint = " (drivers before R535 call it clocks_throttle_reasons.active)"
        raise ParseError(line + (hint if "clocks_event_reasons" in invalid.group(1) else ""))
    columns = len(GPU_DETAIL_FIELDS)

    def row(raw: str, position: int) -> GpuDetails:
        values = [v.strip() for v in raw.split(",")]
        if values[0] == GPU_DETAIL_FIELDS[0]:
            raise ParseError("unexpected header line (use --format=csv,noheader)")
        if len(values) != columns:
            shown = excerpt(raw, 120)
            raise ParseError(f"expected {columns} columns, got {len(values)}: {shown!r}")
        return _details_row(values)

    details: list[GpuDetails] = _smi_rows(text, row, problems)
    return details


_VERSION_LINE_RE = re.compile(r"([A-Za-z][A-Za-z -]*?)\s*:\s*(.*)")
_UNSUPPORTED = "Invalid combination of input arguments"


def parse_smi_version(text: str) -> tuple[str | None, str | None]:
    """(driver version, CUDA version) from `nvidia-smi --version`.

    It prints `NVIDIA-SMI version  : 580.95.05`, `NVML version`, `DRIVER version` and `CUDA
    Version` lines. A driver too old for the option says `Invalid combination of input
    arguments`: both None, which is an answer, not a problem. A broken driver raises.
    """
    fatal = _smi_fatal(text)
    if fatal:
        raise ParseError(fatal)
    if _UNSUPPORTED in text:
        return None, None
    values: dict[str, str] = {}
    for raw in text.splitlines():
        match = _VERSION_LINE_RE.fullmatch(raw.strip())
        if match:
            values[match.group(1).lower()] = match.group(2).strip()
    if not values:
        raise ParseError(first_line(text) or "nvidia-smi printed nothing")

    def value(key: str) -> str | None:
        found = values.get(key)
        return None if found is None or is_unavailable(found) else found

    return value("driver version"), value("cuda version")


# --- topology ------------------------------------------------------------------------------

_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")  # some versions underline the header row
_LINK_RE = re.compile(r"X|SYS|NODE|PHB|PXB|PIX|SOC|NV\d+")  # SOC: drivers before R375's SYS
_GPU_LABEL_RE = re.compile(r"GPU(\d+)")
PCIE_ORDER = ("SYS", "SOC", "NODE", "PHB", "PXB", "PIX")


def parse_topology(text: str) -> Topology:
    """The GPU-to-GPU part of `nvidia-smi topo -m`: a tab-separated matrix whose header row
    names GPU<n> (then NIC<n>, CPU Affinity, NUMA Affinity, GPU NUMA ID), one row per device,
    then a legend. NIC rows and columns are left out. Each GPU row must name a link to every
    GPU (X to itself); anything else raises.
    """
    fatal = _smi_fatal(text)
    if fatal:
        raise ParseError(fatal)
    lines = [_ANSI_RE.sub("", line).rstrip("\n") for line in text.splitlines()]
    lines = lines[: next((i for i, v in enumerate(lines) if v.startswith("Legend")), len(lines))]
    rows = [line for line in lines if line.strip()]
    if not rows or rows[0] == _NO_DEVICES:
        raise ParseError(first_line(text) or "nvidia-smi printed nothing")
    header = [cell.strip() for cell in rows[0].split("\t")]
    gpus = [c for c in header[1:] if _GPU_LABEL_RE.fullmatch(c)]
    if header[0] or not gpus or header[1 : 1 + len(gpus)] != gpus:
        raise ParseError(f"not a topology header: {excerpt(rows[0], 120)!r}")
    devices = len([c for c in header[1:] if re.fullmatch(r"(GPU|NIC)\d+", c)])
    matrix = {cells[0].strip(): cells[1:] for cells in (r.split("\t") for r in rows[1:])}
    links: list[list[str]] = []
    cpu, numa = [], []
    for gpu in gpus:
        cells = [c.strip() for c in matrix.get(gpu, [])]
        # one string per link kind, not one per cell: a worker keeps each host's last
        # topology (hosts.parsers.reuse)
        row = [sys.intern(c) for c in cells[: len(gpus)]]
        if len(row) != len(gpus) or not all(_LINK_RE.fullmatch(c) for c in row):
            raise ParseError(f"{gpu} has no link to every GPU: {excerpt(' '.join(cells), 120)!r}")
        if row[gpus.index(gpu)] != "X":
            raise ParseError(f"{gpu} does not reach itself as X")
        links.append(row)
        rest = cells[devices:]
        cpu.append(rest[0] if rest and rest[0] and not is_unavailable(rest[0]) else None)
        numa.append(rest[1] if len(rest) > 1 and rest[1] and not is_unavailable(rest[1]) else None)
    nvlink = any(c.startswith("NV") for row in links for c in row)
    return Topology(
        links=links,
        nvlink=nvlink,
        summary=topology_summary(links),
        cpu_affinity=cpu,
        numa_affinity=numa,
    )


def topology_summary(links: Sequence[Sequence[str]]) -> str:
    """One line a person reads: which kinds of link join the GPUs, and whether NVLink does."""
    pairs = [c for i, row in enumerate(links) for j, c in enumerate(row) if i != j]
    if not pairs:
        return "one GPU" if links else "no GPUs"
    nv = sorted({c for c in pairs if c.startswith("NV")}, key=lambda c: int(c[2:]))
    pcie = [kind for kind in PCIE_ORDER if kind in pairs]
    if not nv:
        return f"PCIe ({'/'.join(pcie)}) between all GPUs, no NVLink"
    if not pcie:
        return f"NVLink ({'/'.join(nv)}) between all GPUs"
    return f"NVLink ({'/'.join(nv)}) between some GPUs, PCIe ({'/'.join(pcie)}) between others"
