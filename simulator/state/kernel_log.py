"""The kernel's ring buffer as journald keeps it (`journalctl -k`), and the NVIDIA driver's Xids.

Kernel messages are journal entries of their own: identifier `kernel`, no PID, no unit, so a
unit's journal never shows them and `journalctl -k` shows nothing else. The whole journal (no
`-u`, no `-k`) interleaves both by time. The host booted once, so every entry is of the
current boot (`-b`).

An Xid line is the driver's report of a GPU error, naming the GPU by its PCI address in lower
case (`PCI:0000:5d:00` for pci.bus_id `00000000:5D:00.0`), then the Xid number, the process
that had a context on the GPU (when there was one) and what happened.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .units import JournalEntry

if TYPE_CHECKING:
    from .machine import Machine

KERNEL_IDENT = "kernel"
KERNEL_LOG_MAX_LINES = 2000
# What each GPU fault's Xid says: (Xid, the rest of the line after the process).
XIDS: dict[str, tuple[int, str]] = {
    "gpu_fell_off_bus": (79, "GPU has fallen off the bus."),
    "ecc_uncorrectable": (
        48,
        "Ch 00000008, An uncorrectable double bit error (DBE) has been detected on GPU in the "
        "framebuffer at partition 6, subpartition 0.",
    ),
    "row_remap_pending": (
        63,
        "Row Remapper: New row marked for remapping, reset gpu to activate.",
    ),
    "row_remap_failure": (64, "Row Remapper Error: row remap failed, reset gpu to activate."),
    "nvlink_errors": (
        74,
        "NVLink: fatal error detected on link 4(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    ),
}
PROCESS_NAME = "python3"  # the comm the driver reports for a vLLM worker


def xid_address(bus_id: str) -> str:
    """`PCI:0000:5d:00` for pci.bus_id `00000000:5D:00.0` (domain, bus, device; lower case)."""
    domain, bus, rest = bus_id.split(":")
    device = rest.split(".")[0]
    return "PCI:" + f"{domain[-4:]}:{bus}:{device}".lower()


def xid_message(fault: str, bus_id: str, pid: int | None) -> str:
    """The driver's line for `fault` on the GPU at `bus_id`, `pid` the process on it (if any).

    Xid 79 names no process (the GPU is gone); the others name the one that had a context on
    the GPU, or say it is unknown."""
    xid, text = XIDS[fault]
    if xid == 79:
        who = "pid=0"
    elif pid is None:
        who = "pid='<unknown>', name=<unknown>"
    else:
        who = f"pid={pid}, name={PROCESS_NAME}"
    return f"NVRM: Xid ({xid_address(bus_id)}): {xid}, {who}, {text}"


def append(machine: Machine, message: str, wall: float) -> None:
    machine.kernel_log.append(JournalEntry(wall, None, KERNEL_IDENT, 0, message))


def is_kernel(entry: JournalEntry) -> bool:
    return entry.ident == KERNEL_IDENT and entry.unit is None and entry.pid == 0


def select(
    machine: Machine,
    units: Iterable[str] | None,
    *,
    kernel: bool = False,
    grep: re.Pattern[str] | None = None,
) -> list[JournalEntry]:
    """The entries journalctl shows: a unit's, the kernel's, or (neither asked) all of them."""
    if kernel:
        entries = [] if units is not None else list(machine.kernel_log)
    elif units is not None:
        wanted = set(units)
        entries = [e for e in machine.journal if e.unit in wanted]
    elif machine.kernel_log:
        entries = list(heapq.merge(machine.journal, machine.kernel_log, key=lambda e: e.wall))
    else:
        entries = list(machine.journal)
    if grep is not None:
        entries = [e for e in entries if grep.search(e.message)]
    return entries
