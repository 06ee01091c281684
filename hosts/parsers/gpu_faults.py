"""What nvidia-smi and the kernel log say about GPU faults: memory errors that outlive the
driver's load, remapped rows, NVLink links and their error counters, Xid events, lost GPUs.

Pure functions of the text the host printed. Like the other nvidia-smi parsers, a driver
failure raises with nvidia-smi's own line, and `problems` (where taken) keeps the good rows
when one row is bad.
"""

from __future__ import annotations

import re

from ..commands import GPU_ERROR_FIELDS, REMAPPED_ROW_FIELDS
from ..state_gpu import GpuErrors, GpuNvLinks, LostGpu, NvLink, XidEvent
from .common import DIGITS_RE, ParseError, excerpt, first_line, is_unavailable, read_count
from .nvidia import _smi_fatal, _smi_rows

_NO_DEVICES = "No devices were found"
_INVALID_FIELD_RE = re.compile(r'Field "[^"]+" is not a valid field to query\.')
# Drivers before row remapping (R450) do not know the query; an answer, not a fault.
_UNSUPPORTED = ("Invalid combination of input arguments", "is not a valid field to query")
_MIG = {"Enabled": True, "Disabled": False}
_BOOLEANS = {"0": False, "1": True, "No": False, "Yes": True, "False": False, "True": True}


def _flag(value: str, what: str) -> bool | None:
    if is_unavailable(value):
        return None
    if value not in _BOOLEANS:
        raise ParseError(f"{what} is not yes or no: {value!r}")
    return _BOOLEANS[value]


def _columns(line: str, fields: tuple[str, ...]) -> list[str]:
    values = [v.strip() for v in line.split(",")]
    if values[0] == fields[0]:
        raise ParseError("unexpected header line (use --format=csv,noheader)")
    if len(values) != len(fields):
        shown = excerpt(line, 120)
        raise ParseError(f"expected {len(fields)} columns, got {len(values)}: {shown!r}")
    return values


def _answered(text: str) -> bool:
    """Whether there is anything to parse; raises on an empty answer."""
    if not text.strip():
        raise ParseError("nvidia-smi printed nothing")
    return not (first_line(text) == _NO_DEVICES and len(text.strip().splitlines()) == 1)


def parse_gpu_errors(text: str, *, problems: list[str] | None = None) -> list[GpuErrors]:
    """Rows of `nvidia-smi --query-gpu=<GPU_ERROR_FIELDS> --format=csv,noheader`."""
    if not _answered(text):
        return []
    if _INVALID_FIELD_RE.fullmatch(first_line(text)):
        raise ParseError(first_line(text))

    def row(line: str, position: int) -> GpuErrors:
        index, bus_id, aggregate, retired, mig = _columns(line, GPU_ERROR_FIELDS)
        number = read_count(index, "index")
        if number is None:
            raise ParseError(f"GPU index unavailable: {excerpt(line, 120)!r}")
        return GpuErrors(
            index=number,
            pci_bus_id=None if is_unavailable(bus_id) else bus_id,
            ecc_uncorrected_aggregate=read_count(aggregate, "aggregate uncorrected ECC errors"),
            retired_pages_pending=_flag(retired, "retired pages pending"),
            mig_mode=_MIG.get(mig) if not is_unavailable(mig) else None,
        )

    rows: list[GpuErrors] = _smi_rows(text, row, problems)
    return rows


def parse_remapped_rows(text: str, *, problems: list[str] | None = None) -> list[GpuErrors]:
    """Rows of `nvidia-smi --query-remapped-rows=<REMAPPED_ROW_FIELDS> --format=csv,noheader`,
    each as a GpuErrors whose index is unknown (-1) and whose uuid names the GPU. GPUs without
    row remapping print `[N/A]`; a driver without the query prints its usage: no rows."""
    fatal = _smi_fatal(text)
    if fatal:
        raise ParseError(fatal)
    if any(marker in text for marker in _UNSUPPORTED) or not _answered(text):
        return []

    def row(line: str, position: int) -> GpuErrors:
        uuid, correctable, uncorrectable, pending, failure = _columns(line, REMAPPED_ROW_FIELDS)
        if is_unavailable(uuid):
            raise ParseError(f"GPU UUID unavailable: {excerpt(line, 120)!r}")
        return GpuErrors(
            index=-1,
            uuid=uuid,
            remapped_rows_correctable=read_count(correctable, "rows remapped (correctable)"),
            remapped_rows_uncorrectable=read_count(uncorrectable, "rows remapped (uncorrectable)"),
            remap_pending=_flag(pending, "remapping pending"),
            remap_failure=_flag(failure, "remapping failure"),
        )

    rows: list[GpuErrors] = _smi_rows(text, row, problems)
    return rows


# --- NVLink --------------------------------------------------------------------------------

_GPU_HEADER_RE = re.compile(r"GPU (\d+): (.*?)(?: \(UUID: ([^)]+)\))?")
_LINK_RE = re.compile(r"Link (\d+): (.*)")
_SPEED_RE = re.compile(r"(\d+(?:\.\d+)?) GB/s")
_COUNTER_RE = re.compile(r"([A-Za-z][A-Za-z -]*?) Errors: (\S+)")
_COUNTER_ATTRS = {"Replay": "replay_errors", "Recovery": "recovery_errors", "CRC": "crc_errors"}


def _nvlink_blocks(text: str) -> list[tuple[GpuNvLinks, list[tuple[int, str]]]]:
    """The GPU header lines and the `Link <k>: ...` lines under each."""
    fatal = _smi_fatal(text)
    if fatal:
        raise ParseError(fatal)
    blocks: list[tuple[GpuNvLinks, list[tuple[int, str]]]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        header = _GPU_HEADER_RE.fullmatch(line)
        link = _LINK_RE.fullmatch(line)
        if header:
            blocks.append((GpuNvLinks(index=int(header.group(1)), uuid=header.group(3)), []))
        elif link and blocks:
            blocks[-1][1].append((int(link.group(1)), link.group(2).strip()))
        else:
            raise ParseError(f"not an NVLink line: {excerpt(line, 120)!r}")
    return blocks


def parse_nvlink_status(text: str) -> list[GpuNvLinks]:
    """`nvidia-smi nvlink -s`: per GPU, each link's speed (`26.562 GB/s`) or `<inactive>`.
    Boards without NVLink print nothing: an empty list."""
    gpus = []
    for gpu, lines in _nvlink_blocks(text):
        for number, value in lines:
            speed = _SPEED_RE.fullmatch(value)
            if value == "<inactive>":
                gpu.links.append(NvLink(link=number, active=False))
            elif speed:
                gpu.links.append(NvLink(link=number, speed_gbps=float(speed.group(1))))
            else:
                raise ParseError(f"GPU {gpu.index} link {number}: not a speed: {value!r}")
        gpus.append(gpu)
    return gpus


def parse_nvlink_errors(text: str) -> dict[int, dict[int, dict[str, int | None]]]:
    """`nvidia-smi nvlink -e`: per GPU index, per link, its replay, recovery and CRC error
    counters (by NvLink attribute). Counters a driver adds later are left out."""
    found: dict[int, dict[int, dict[str, int | None]]] = {}
    for gpu, lines in _nvlink_blocks(text):
        links = found.setdefault(gpu.index, {})
        for number, value in lines:
            counter = _COUNTER_RE.fullmatch(value)
            if not counter:
                raise ParseError(f"GPU {gpu.index} link {number}: not an error counter: {value!r}")
            attr = _COUNTER_ATTRS.get(counter.group(1))
            if attr is not None:
                links.setdefault(number, {})[attr] = read_count(counter.group(2), attr)
    return found


# --- the kernel log ------------------------------------------------------------------------

# `NVRM: Xid (PCI:0000:5d:00): 79, pid=0, GPU has fallen off the bus.`; drivers before R470
# print the address without `PCI:`.
_XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\): (\d+),?\s*(.*)"
)
_ISO_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:[+-]\d{2}:?\d{2}|Z)")
_JOURNAL_REFUSALS = (
    "No journal files were opened due to insufficient permissions",
    "No journal files were found",
    "Compiled without pattern matching support",
    "Failed to",
    "Hint: You are currently not seeing messages",
)


def pci_key(address: str) -> str:
    """The kernel's name for a GPU (`0000:5d:00`) from nvidia-smi's bus id (`00000000:5D:00.0`)
    or from an Xid line's own address."""
    domain, bus, device = address.split(".")[0].split(":")[-3:]
    return f"{domain[-4:]}:{bus}:{device}".lower()


def parse_xid_journal(text: str) -> list[XidEvent]:
    """`journalctl -k -b -q -o short-iso --grep 'NVRM: Xid'`: the Xid events, oldest first.

    With -q an empty log prints nothing; without it `-- No entries --`. A journal the user may
    not read, or a journalctl without pattern matching, raises with journalctl's own line.
    Lines that do not carry a whole Xid (a cut last line, a continuation) are left out.
    """
    events = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith(_JOURNAL_REFUSALS):
            raise ParseError(line)
        match = _XID_RE.search(line)
        if not match:
            continue
        stamp = _ISO_RE.match(line)
        events.append(
            XidEvent(
                code=int(match.group(2)),
                pci=pci_key(match.group(1)),
                message=excerpt(match.group(3), 200),
                at=stamp.group(0) if stamp else None,
            )
        )
    return events


# --- GPUs nvidia-smi lost ------------------------------------------------------------------

_HANDLE_RE = re.compile(
    r"Unable to determine the device handle for GPU\s?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:"
    r"[0-9A-Fa-f]{2}\.[0-7]): (.*)"
)
_LOST_VALUES = ("[GPU is lost]", "[Unknown Error]", "ERR!", "[GPU requires reset]")


def parse_lost_gpus(text: str) -> list[LostGpu]:
    """GPUs in a `--query-gpu` answer that nvidia-smi could not read: the device-handle line
    of a GPU that fell off the bus, or a row whose values are `[GPU is lost]`, `ERR!`..."""
    lost = []
    for raw in text.splitlines():
        line = raw.strip()
        handle = _HANDLE_RE.fullmatch(line)
        if handle:
            lost.append(LostGpu(message=excerpt(handle.group(2), 160), pci_bus_id=handle.group(1)))
            continue
        values = [v.strip() for v in line.split(",")]
        bad = next((v for v in values if v in _LOST_VALUES), None)
        if bad is not None:
            index = int(values[0]) if DIGITS_RE.fullmatch(values[0]) else None
            lost.append(LostGpu(message=bad.strip("[]"), index=index))
    return lost
